-- push_queued(base, prios, stats, notify, id, prio, group)
-- Appends job `id` to its group's FIFO at priority `prio`; adds the group to
-- the tail of that priority's ring and the priority to `prios` when the group
-- list was empty (a group is in the ring exactly when its list is non-empty);
-- counts it queued; leaves a wake-up token for idle workers (at most 64).
-- Derived keys: base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio
-- `prio` and `group` may be false (HMGET of a field the job hash leaves out
-- at its default): priority '0', the default group ''.
local function push_queued(base, prios, stats, notify, id, prio, group)
  prio, group = prio or '0', group or ''
  local gkey = base .. 'group:' .. prio .. ':' .. group
  if redis.call('RPUSH', gkey, id) == 1 then
    if redis.call('RPUSH', base .. 'ring:' .. prio, group) == 1 then
      redis.call('ZADD', prios, prio, prio)
    end
  end
  redis.call('HINCRBY', stats, 'queued', 1)
  if redis.call('LLEN', notify) < 64 then
    redis.call('RPUSH', notify, '1')
  end
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
