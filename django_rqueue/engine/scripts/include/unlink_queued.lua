-- unlink_queued(base, prios, stats, id, prio, group): the reverse of
-- push_queued, for a job
-- taken out of the middle of its group (cancel/delete). O(group length).
-- A group left empty leaves its ring, or, parked there (its group at the
-- "group_concurrency" cap, include/park_group.lua), its parked priorities.
-- Derived keys: base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio,
-- base .. 'parked:' .. group
--@include add_count.lua
local function unlink_queued(base, prios, stats, id, prio, group)
  prio, group = prio or '0', group or ''
  local gkey = base .. 'group:' .. prio .. ':' .. group
  if redis.call('LREM', gkey, 1, id) == 0 then
    return
  end
  add_count(stats, 'queued', -1)
  if redis.call('LLEN', gkey) == 0 then
    if redis.call('SREM', base .. 'parked:' .. group, prio) == 1 then
      return
    end
    local ring = base .. 'ring:' .. prio
    redis.call('LREM', ring, 0, group)
    if redis.call('LLEN', ring) == 0 then
      redis.call('ZREM', prios, prio)
    end
  end
end
