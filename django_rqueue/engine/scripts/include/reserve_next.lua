-- reserve_next(base, prios, reserved, stats, notify, lease, worker): take the
-- next queued job under a lease and a new fencing token, or return false when
-- nothing is queued (and clear `notify`, so a token left there afterwards
-- always means "new work since you looked").
--
-- Order: highest priority in `prios`; at that priority the group at the head
-- of its ring (moved to the tail if it still has jobs: round-robin between
-- groups); that group's oldest job (FIFO). O(log P) for P priority levels.
-- On success: state = running, attempts + 1, token + 1, started_at = now,
-- worker = `worker`, lease deadline now + `lease` ms in `reserved`; returns
-- the job's id followed by its whole hash as a flat field/value list.
-- Derived keys: base .. 'ring:' .. prio, base .. 'group:' .. prio .. ':' .. group,
-- base .. 'job:' .. id (which group and job is only known once popped).
--@include now_ms.lua
local function reserve_next(base, prios, reserved, stats, notify, lease, worker)
  -- Bounded: ids whose job hash vanished (deleted behind our back) are skipped.
  for _ = 1, 100 do
    local top = redis.call('ZREVRANGE', prios, 0, 0)[1]
    if not top then
      redis.call('DEL', notify)
      return false
    end
    local ring = base .. 'ring:' .. top
    local group = redis.call('LPOP', ring)
    if not group then
      redis.call('ZREM', prios, top)
    else
      local gkey = base .. 'group:' .. top .. ':' .. group
      local id = redis.call('LPOP', gkey)
      if redis.call('LLEN', gkey) > 0 then
        redis.call('RPUSH', ring, group)
      elseif redis.call('LLEN', ring) == 0 then
        redis.call('ZREM', prios, top)
      end
      if id then
        redis.call('HINCRBY', stats, 'queued', -1)
        local jkey = base .. 'job:' .. id
        if redis.call('HGET', jkey, 's') == 'queued' then
          local now = now_ms()
          redis.call('HINCRBY', jkey, 'token', 1)
          redis.call('HINCRBY', jkey, 'attempts', 1)
          redis.call('HSET', jkey, 's', 'running', 'started_at', now, 'worker', worker)
          redis.call('ZADD', reserved, now + lease, id)
          local reply = redis.call('HGETALL', jkey)
          table.insert(reply, 1, id)
          return reply
        end
      end
    end
  end
  return false
end
