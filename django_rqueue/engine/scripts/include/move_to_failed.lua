-- move_to_failed(base, jkey, failed, stats, id, now): final failure.
-- Derived key: base .. 'throughput' (see count_finished).
--@include count_finished.lua
--@include release_unique.lua
local function move_to_failed(base, jkey, failed, stats, id, now)
  redis.call('HSET', jkey, 's', 'failed', 'finished_at', now)
  redis.call('HDEL', jkey, 'worker')
  redis.call('ZADD', failed, now, id)
  redis.call('HINCRBY', stats, 'failed', 1)
  count_finished(base, 'f', now)
  release_unique(base, jkey, id)
end
