-- reserve_next(base, prios, reserved, stats, notify, lease, worker, cap, want): take the
-- next queued job, and up to `want` (>= 1) when they come from one group in a row, each
-- under a lease and a new fencing token; return the list of reservations, empty when
-- nothing is queued (then `notify` is cleared, so a token left there afterwards always
-- means "new work since you looked").
--
-- Order: highest priority in `prios`; at that priority the group at the head
-- of its ring (moved to the tail if it still has jobs: round-robin between
-- groups); that group's oldest job (FIFO). O(log P) for P priority levels.
-- On success: state = running, attempts + 1, token + 1, started_at = now,
-- worker = `worker`, lease deadline now + `lease` ms in `reserved`; each reservation
-- is the job's id followed by its whole hash as a flat field/value list.
--
-- Several at once: when the group popped is the only one left in its ring and there is
-- no cap, the next `want` jobs in the order above are all that group's oldest ones, so
-- they are popped with one LPOP and share one clock read: the commands per job fall
-- from eleven to four. The first job of the run that is not reserved (corrupt, not
-- queued, expired) ends the run: the ids popped after it go back to the head of their
-- list, and the order is decided again from `prios`, as one job at a time would.
--
-- `cap` (RQUEUE "group_concurrency"; 0 = none): the job counts against its
-- group's cap (include/group_slot_take.lua), and a group that reaches it is
-- parked (include/park_group.lua) instead of going back to the tail of the
-- ring, so later reserves never look at it until one of its running jobs ends
-- (include/group_slot_free.lua puts it back at the tail). A group popped from a
-- ring while already at the cap (it reached it at another priority, or the cap
-- was lowered) is parked there and the next one is tried. Groups below the cap
-- keep the order above.
--
-- A job whose expiry has come is ended instead (include/expire_if_due.lua) and the
-- next one is taken.
--
-- Corrupt data never stops the script half-way (Redis would keep the group popped from
-- its ring and strand its jobs): a job whose record is not a hash, or has no state, is
-- ended in the failed store (include/fail_corrupt.lua) and the next job is taken; a ring
-- or a group list that is not a list is deleted (the groups or ids it held, if any, are
-- lost to reserves: enqueues make new ones). Records are read with redis.pcall, so a
-- healthy job costs no extra command. A `reserved` that is not a zset fails the call
-- with an error naming it, after putting back the group and job it popped.
--
-- At most RESERVE_TRIES groups are popped per job (those skipped: parked ones, ids
-- whose job hash vanished behind our back, expired jobs); when they run out,
-- false is returned with a wake-up token left on `notify`, so the caller (or an
-- idle worker) comes back at once and the next call goes on where this one stopped.
-- Derived keys: base .. 'ring:' .. prio, base .. 'group:' .. prio .. ':' .. group,
-- base .. 'job:' .. id (which group and job is only known once popped), and with a
-- cap base .. 'grouprun', base .. 'groupfull', base .. 'parked:' .. group.
--@include add_count.lua
--@include expire_if_due.lua
--@include fail_corrupt.lua
--@include group_slot_take.lua
--@include now_ms.lua
--@include park_group.lua
--@include read_record.lua
--@include whole.lua
local RESERVE_TRIES, NOTIFY_MAX = 100, 64
local function reserve_next(base, prios, reserved, stats, notify, lease, worker, cap, want)
  -- Push ids[from..] back to the head of the group list `gkey`, in their order, and count
  -- them as queued again.
  local function put_back(gkey, ids, from)
    for j = #ids, from, -1 do
      redis.call('LPUSH', gkey, ids[j])
    end
    add_count(stats, 'queued', #ids - from + 1)
  end
  local got = {}
  for _ = 1, RESERVE_TRIES do
    local top = redis.call('ZREVRANGE', prios, 0, 0)[1]
    if not top then
      redis.call('DEL', notify)
      return got
    end
    local ring = base .. 'ring:' .. top
    local group = redis.pcall('LPOP', ring)
    if type(group) == 'table' then  -- the ring is not a list
      redis.call('DEL', ring)
      redis.call('ZREM', prios, top)
    elseif not group then
      redis.call('ZREM', prios, top)
    elseif cap > 0 and tonumber(redis.call('HGET', base .. 'grouprun', group) or '0') >= cap then
      park_group(base, group, top)
      if redis.call('LLEN', ring) == 0 then
        redis.call('ZREM', prios, top)
      end
    else
      local gkey = base .. 'group:' .. top .. ':' .. group
      local run = 1
      if want > 1 and cap == 0 and redis.call('LLEN', ring) == 0 then
        run = want  -- the only group at the top priority: its next jobs in a row
      end
      local ids = redis.pcall('LPOP', gkey, run)
      if type(ids) == 'table' and ids.err then  -- the group list is not a list
        redis.call('DEL', gkey)
        ids = {}
      elseif not ids then
        ids = {}
      end
      local full = false
      if #ids > 0 then
        add_count(stats, 'queued', -#ids)
        local now = now_ms()
        for i, id in ipairs(ids) do
          local jkey = base .. 'job:' .. id
          -- One read and one write (not HGET, HGET, HINCRBY x2, HSET): every job passes here.
          local job, problem = read_record(jkey, 's', 'exp', 'token', 'attempts')
          local reply = nil
          if problem then
            fail_corrupt(base, jkey, stats, id, now, problem)
          elseif job[1] == 'queued'
              and not (job[2] and expire_if_due(base, jkey, stats, id, now)) then
            if type(redis.pcall('ZADD', reserved, now + lease, id)) == 'table' then
              -- `reserved` is not a zset: no lease can be taken. Undo the pops and fail.
              put_back(gkey, ids, i)
              redis.call('LPUSH', ring, group)
              error(redis.error_reply('ERR rqueue reserve: ' .. reserved .. ' is a '
                                      .. redis.call('TYPE', reserved)['ok'] .. ', not a zset'))
            end
            redis.call('HSET', jkey, 's', 'running', 'started_at', now, 'worker', worker,
                       'token', whole(job[3], 0) + 1, 'attempts', whole(job[4], 0) + 1)
            if cap > 0 then
              full = group_slot_take(base, jkey, group, cap)
            end
            reply = redis.call('HGETALL', jkey)
            table.insert(reply, 1, id)
            got[#got + 1] = reply
          end
          if not reply and i < #ids then  -- the run ends here: the rest go back, in order
            put_back(gkey, ids, i + 1)
            break
          end
        end
      end
      local requeued = false
      if redis.call('LLEN', gkey) > 0 then
        if full then
          park_group(base, group, top)
        else
          redis.call('RPUSH', ring, group)
          requeued = true
        end
      end
      if not requeued and redis.call('LLEN', ring) == 0 then
        redis.call('ZREM', prios, top)
      end
      if #got > 0 then
        return got
      end
    end
  end
  if redis.call('LLEN', notify) < NOTIFY_MAX then
    redis.call('RPUSH', notify, '1')
  end
  return got
end
