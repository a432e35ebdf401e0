-- park_group(base, group, prio): hold the queued jobs of `group` at priority
-- `prio` out of that priority's ring while the group is at its
-- "group_concurrency" cap, so that reserves skip it without looking at it. The
-- caller has taken the group out of the ring, or it was never in it (its list
-- there was empty). The group is (or becomes) a member of base .. 'groupfull';
-- include/group_slot_free.lua puts it back at the tails of its rings when one of
-- its running jobs ends. A group's list at a priority is in that ring or parked
-- there, never both. O(1).
-- Derived keys: base .. 'groupfull', base .. 'parked:' .. group.
local function park_group(base, group, prio)
  redis.call('SADD', base .. 'groupfull', group)
  redis.call('SADD', base .. 'parked:' .. group, prio)
end
