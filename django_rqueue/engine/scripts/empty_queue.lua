-- empty_queue: delete up to a bounded number of the queue's queued jobs ("empty this
-- queue" in the admin). The caller loops, one bounded call per chunk, so a queue of
-- a million jobs is never read whole and Redis is never held for long.
--
-- KEYS[1] queue base (derives group:<prio>:<group>, ring:<prio>, parked:<group>,
--         job:<id>, unique:<key>, done:<id>, and for a job with dependents those of
--         include/dep_notify.lua)
-- KEYS[2] prios zset   KEYS[3] stats hash   KEYS[4] groupfull set
-- ARGV[1] limit: queued jobs deleted at most by this call (> 0)
--
-- Takes the groups in serving order (highest priority first, each ring from its
-- head), then the groups parked at their "group_concurrency" cap, and deletes the
-- jobs of each from the head of its list: the record (and its unique key, waking
-- its waiters, telling its dependents it was 'deleted': include/dep_notify.lua, as
-- cancel.lua in mode delete) when it is still queued; an id whose
-- record is gone or not queued is only dropped from the list. A group list left
-- empty leaves its ring (or its parked priorities), a ring left empty leaves
-- `prios`, as include/unlink_queued.lua does. Scheduled, running and failed jobs
-- are not touched: a scheduled job (or a retry) is queued when due, as usual.
-- Corrupt data (include/record_problem.lua) does not stop it half-way: a queued id
-- whose record is not a hash has that record deleted (counted as deleted); a ring or
-- group list that is not a list is deleted.
-- Returns {deleted, dropped (stale ids), more (1 when queued jobs are left)}.

--@include add_count.lua
--@include dep_notify.lua
--@include now_ms.lua
--@include release_unique.lua
--@include wake_waiters.lua

local base, prios, stats, groupfull = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local limit = tonumber(ARGV[1])
if not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue empty_queue: bad limit')
end
local deleted, dropped, budget = 0, 0, limit

-- Delete up to `budget` jobs from the head of the group list `gkey`; returns
-- whether the list is now empty.
local function drain(gkey)
  local ids = redis.pcall('LRANGE', gkey, 0, budget - 1)
  if ids.err then
    redis.call('DEL', gkey)
    return true
  end
  for _, id in ipairs(ids) do
    local jkey = base .. 'job:' .. id
    local job = redis.pcall('HMGET', jkey, 's', 'nx', 'n', 'token')
    if job.err then
      redis.call('DEL', jkey)
      deleted = deleted + 1
    elseif job[1] == 'queued' then
      release_unique(base, jkey, id)
      wake_waiters(base, jkey, id)
      if job[2] then
        dep_notify(base, {{id, job[2], 'c', job[4], 'deleted', job[3], ''}}, now_ms())
      end
      redis.call('DEL', jkey)
      deleted = deleted + 1
    else
      dropped = dropped + 1
    end
  end
  budget = budget - #ids
  if #ids > 0 then
    redis.call('LTRIM', gkey, #ids, -1)
    add_count(stats, 'queued', -#ids)
  end
  return redis.call('LLEN', gkey) == 0
end

-- The groups in the rings, highest priority first.
while budget > 0 do
  local top = redis.call('ZREVRANGE', prios, 0, 0)
  if #top == 0 then
    break
  end
  local prio = top[1]
  local ring = base .. 'ring:' .. prio
  local group = redis.pcall('LINDEX', ring, 0)
  if type(group) == 'table' then  -- not a list
    redis.call('DEL', ring)
    redis.call('ZREM', prios, prio)
  elseif not group then
    redis.call('ZREM', prios, prio)  -- an empty ring: nothing queued at this priority
  elseif drain(base .. 'group:' .. prio .. ':' .. group) then
    redis.call('LREM', ring, 1, group)
    if redis.call('LLEN', ring) == 0 then
      redis.call('ZREM', prios, prio)
    end
  end
end

-- The groups parked at their cap (at most one per running job that holds a slot).
if budget > 0 then
  for _, group in ipairs(redis.call('SMEMBERS', groupfull)) do
    local parked = base .. 'parked:' .. group
    for _, prio in ipairs(redis.call('SMEMBERS', parked)) do
      if budget <= 0 then
        break
      end
      if drain(base .. 'group:' .. prio .. ':' .. group) then
        redis.call('SREM', parked, prio)
      end
    end
    if budget <= 0 then
      break
    end
  end
end

local more = 0
if budget <= 0 then
  more = 1
end
return {deleted, dropped, more}
