-- group_slot_take(base, jkey, group, cap) -> whether `group` is now at its cap:
-- count the job `jkey`, just reserved, against the at most `cap` (>= 1) running
-- jobs of its group (RQUEUE "group_concurrency"). The job is marked (field 'gc')
-- so that the end of its run gives the slot back exactly once
-- (include/group_slot_free.lua), and its group's count in base .. 'grouprun' goes
-- up by 1; at the cap the group joins base .. 'groupfull': from then on its queued
-- jobs are parked (include/park_group.lua) instead of waiting in a ring. O(1).
-- Derived keys: base .. 'grouprun', base .. 'groupfull'.
local function group_slot_take(base, jkey, group, cap)
  redis.call('HSET', jkey, 'gc', '1')
  if redis.call('HINCRBY', base .. 'grouprun', group, 1) >= cap then
    redis.call('SADD', base .. 'groupfull', group)
    return true
  end
  return false
end
