-- add_delayed(delayed, wake, id, run_at): add_delayed_many for one job.
--@include add_delayed_many.lua
local function add_delayed(delayed, wake, id, run_at)
  add_delayed_many(delayed, wake, {id}, run_at)
end
