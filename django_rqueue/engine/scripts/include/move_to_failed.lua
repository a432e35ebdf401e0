-- move_to_failed(base, jkey, failed, stats, id, now, links): final failure; wakes the
-- job's waiters (include/wake_waiters.lua). `links` (nil for a job without dependents) is
-- {nx, token, name, error}: the job's 'nx' field, its fencing token when it ended, its
-- name and its last error record as stored; its dependents then hear of the failure
-- (include/dep_notify.lua, kind 'f', the error as the body) once it is in `failed`.
-- Derived keys: base .. 'throughput' (see count_finished), base .. 'done:' .. id, and
-- with `links` those of include/dep_notify.lua.
--@include add_count.lua
--@include count_finished.lua
--@include notify_dependents.lua
--@include release_unique.lua
--@include wake_waiters.lua
local function move_to_failed(base, jkey, failed, stats, id, now, links)
  redis.call('HSET', jkey, 's', 'failed', 'finished_at', now)
  redis.call('HDEL', jkey, 'worker')
  redis.call('ZADD', failed, now, id)
  add_count(stats, 'failed', 1)
  count_finished(base, 'f', now)
  release_unique(base, jkey, id)
  wake_waiters(base, jkey, id)
  if links then
    notify_dependents(base, {{id, links[1], 'f', links[2], '', links[3], links[4]}}, now)
  end
end
