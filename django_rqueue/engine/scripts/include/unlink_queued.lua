-- unlink_queued(base, prios, stats, id, prio, group): the reverse of
-- push_queued, for a job
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
