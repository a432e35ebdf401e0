-- add_delayed(delayed, wake, id, run_at): schedule `id` at `run_at` (ms) and,
-- when it becomes the earliest due job, leave a token on `wake` so a sleeping
-- poller wakes early (at most 16 tokens).
local function add_delayed(delayed, wake, id, run_at)
  local head = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  redis.call('ZADD', delayed, run_at, id)
  if (head[2] == nil or run_at < tonumber(head[2])) and redis.call('LLEN', wake) < 16 then
    redis.call('RPUSH', wake, '1')
  end
end
