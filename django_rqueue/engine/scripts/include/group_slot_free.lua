-- group_slot_free(base, jkey): at the end of a run (ack, fail, reclaim,
-- release), give back the group slot the job `jkey` holds, if it holds one
-- (field 'gc', include/group_slot_take.lua; without it, as for a job reserved
-- while the queue had no cap, nothing changes). Its group's count in
-- base .. 'grouprun' goes down by 1 (the field is removed at 0). A group that
-- was at its cap leaves base .. 'groupfull', and the priorities it is parked at
-- (include/park_group.lua) go back to the tails of their rings, with one
-- wake-up token on base .. 'notify' for an idle worker (at most 64 tokens, none
-- while the queue is paused, as include/push_queued_many.lua). The cap itself
-- is not needed: a slot given back is below any cap the group was at; if the
-- cap was lowered meanwhile, the next reserve parks the group again.
-- O(P) for the P (<= 201) priorities the group is parked at; O(1) otherwise.
-- Derived keys: base .. 'grouprun', base .. 'groupfull', base .. 'parked:' .. group,
-- base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio, base .. 'prios',
-- base .. 'notify', base .. 'paused'.
local function group_slot_free(base, jkey)
  local job = redis.call('HMGET', jkey, 'gc', 'group')
  if not job[1] then
    return
  end
  local group = job[2] or ''
  redis.call('HDEL', jkey, 'gc')
  local grouprun = base .. 'grouprun'
  if redis.call('HINCRBY', grouprun, group, -1) <= 0 then
    redis.call('HDEL', grouprun, group)
  end
  if redis.call('SREM', base .. 'groupfull', group) == 0 then
    return
  end
  local parked = base .. 'parked:' .. group
  local levels = redis.call('SMEMBERS', parked)
  if #levels == 0 then
    return
  end
  redis.call('DEL', parked)
  for _, prio in ipairs(levels) do
    if redis.call('EXISTS', base .. 'group:' .. prio .. ':' .. group) == 1 then
      if redis.call('RPUSH', base .. 'ring:' .. prio, group) == 1 then
        redis.call('ZADD', base .. 'prios', prio, prio)
      end
    end
  end
  local notify = base .. 'notify'
  if redis.call('EXISTS', base .. 'paused') == 0 and redis.call('LLEN', notify) < 64 then
    redis.call('RPUSH', notify, '1')
  end
end
