-- push_queued(base, prios, stats, notify, id, prio, group)
-- Appends job `id` to its group's FIFO at priority `prio`; adds the group to
-- the tail of that priority's ring and the priority to `prios` when the group
-- list was empty (a group is in the ring exactly when its list is non-empty);
-- counts it queued; leaves a wake-up token for idle workers (at most 64).
-- push_queued_many(base, prios, stats, notify, ids, prio, group): the same for
-- the jobs `ids` (a Lua array, in order) of one group, with one command of
-- each kind instead of one per job.
-- Derived keys: base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio
-- `prio` and `group` may be false (HMGET of a field the job hash leaves out
-- at its default): priority '0', the default group ''.
local PUSH_CHUNK, NOTIFY_TOKENS = 1000, 64
local function push_queued_many(base, prios, stats, notify, ids, prio, group)
  local n = #ids
  if n == 0 then
    return
  end
  prio, group = prio or '0', group or ''
  local gkey = base .. 'group:' .. prio .. ':' .. group
  local length = 0
  for i = 1, n, PUSH_CHUNK do  -- unpack() is bounded by Lua's C stack
    length = redis.call('RPUSH', gkey, unpack(ids, i, math.min(i + PUSH_CHUNK - 1, n)))
  end
  if length == n then
    if redis.call('RPUSH', base .. 'ring:' .. prio, group) == 1 then
      redis.call('ZADD', prios, prio, prio)
    end
  end
  redis.call('HINCRBY', stats, 'queued', n)
  local tokens = math.min(n, NOTIFY_TOKENS - redis.call('LLEN', notify))
  if tokens > 0 then
    local ones = {}
    for i = 1, tokens do
      ones[i] = '1'
    end
    redis.call('RPUSH', notify, unpack(ones))
  end
end

local function push_queued(base, prios, stats, notify, id, prio, group)
  push_queued_many(base, prios, stats, notify, {id}, prio, group)
end

-- unlink_queued(base, prios, stats, id, prio, group): the reverse, for a job
-- taken out of the middle of its group (cancel/delete). O(group length).
local function unlink_queued(base, prios, stats, id, prio, group)
  prio, group = prio or '0', group or ''
  local gkey = base .. 'group:' .. prio .. ':' .. group
  if redis.call('LREM', gkey, 1, id) == 0 then
    return
  end
  redis.call('HINCRBY', stats, 'queued', -1)
  if redis.call('LLEN', gkey) == 0 then
    local ring = base .. 'ring:' .. prio
    redis.call('LREM', ring, 0, group)
    if redis.call('LLEN', ring) == 0 then
      redis.call('ZREM', prios, prio)
    end
  end
end
