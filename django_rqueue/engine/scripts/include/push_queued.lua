-- push_queued(base, prios, stats, notify, id, prio, group): push_queued_many
-- for one job.
--@include push_queued_many.lua
local function push_queued(base, prios, stats, notify, id, prio, group)
  push_queued_many(base, prios, stats, notify, {id}, prio, group)
end
