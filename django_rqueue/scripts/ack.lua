-- ack: a running job succeeded; store its result and start its record's TTL.
--
-- KEYS[1] queue base (derives unique:<key>, throughput, succeeded)   KEYS[2] job hash
-- KEYS[3] reserved zset   KEYS[4] stats hash
-- ARGV[1] job id   ARGV[2] fencing token   ARGV[3] result (opaque JSON)
-- ARGV[4] result TTL in seconds (0 = delete the record now)
--
-- Clears `error` (the history err:1.. stays). Counts the success in this
-- minute's throughput slot; when the record is kept (TTL > 0) its id joins
-- the `succeeded` zset (id -> finished-at ms) of the latest 1000 successes,
-- which the admin lists (ids whose record expired are skipped there).
-- Returns {'ok'} or {'stale', state, current token} (nothing changed).

--@include now.lua
--@include finish.lua

local base, jkey, reserved, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, ttl = ARGV[1], tonumber(ARGV[4])
if not ttl or ttl < 0 then
  return redis.error_reply('ERR rqueue ack: bad result TTL ' .. tostring(ARGV[4]))
end
local stale = check_token(jkey, ARGV[2])
if stale then
  return stale
end
local now = now_ms()
redis.call('ZREM', reserved, id)
redis.call('HSET', jkey, 'state', 'succeeded', 'finished_at', now, 'result', ARGV[3])
redis.call('HDEL', jkey, 'worker', 'error')
redis.call('HINCRBY', stats, 'succeeded', 1)
release_unique(base, jkey, id)
count_finished(base, 's', now)
if ttl > 0 then
  local succeeded = base .. 'succeeded'
  redis.call('ZADD', succeeded, now, id)
  redis.call('ZREMRANGEBYRANK', succeeded, 0, -1001)
  redis.call('EXPIRE', jkey, ttl)
else
  redis.call('DEL', jkey)
end
return {'ok'}
