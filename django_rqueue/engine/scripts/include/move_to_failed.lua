-- move_to_failed(base, jkey, failed, stats, id, now): final failure; wakes the
-- job's waiters (include/wake_waiters.lua).
-- Derived keys: base .. 'throughput' (see count_finished), base .. 'done:' .. id.
--@include add_count.lua
--@include count_finished.lua
--@include release_unique.lua
--@include wake_waiters.lua
local function move_to_failed(base, jkey, failed, stats, id, now)
  redis.call('HSET', jkey, 's', 'failed', 'finished_at', now)
  redis.call('HDEL', jkey, 'worker')
  redis.call('ZADD', failed, now, id)
  add_count(stats, 'failed', 1)
  count_finished(base, 'f', now)
  release_unique(base, jkey, id)
  wake_waiters(base, jkey, id)
end
