-- ack_job(base, jkey, reserved, stats, id, token, result, ttl): record that
-- the running job `id` succeeded under `token`; nil on success, else the
-- reply {'stale', state, current token} (nothing changed).
--
-- Stores `result`, clears `error` (the history err:1.. stays) and keeps
-- `worker` (the id of the worker whose attempt succeeded), counts the
-- success in this minute's throughput slot; when the record is kept
-- (`ttl` > 0 s) its id joins the `succeeded` zset (id -> finished-at ms) of
-- the latest 1000 successes, which the admin lists, and the record expires
-- after `ttl` seconds; `ttl` 0 deletes it now.
-- Waiters of the job are woken (include/wake_waiters.lua), its group slot
-- is given back (include/group_slot_free.lua), and the attempt's duration is
-- counted (include/observe_duration.lua).
-- Derived keys: base .. 'succeeded', base .. 'throughput', base .. 'unique:' .. key,
-- base .. 'done:' .. id, base .. 'durations', and those of include/group_slot_free.lua.
--@include check_token.lua
--@include count_finished.lua
--@include group_slot_free.lua
--@include now_ms.lua
--@include observe_duration.lua
--@include release_unique.lua
--@include wake_waiters.lua
local function ack_job(base, jkey, reserved, stats, id, token, result, ttl)
  local stale = check_token(jkey, token)
  if stale then
    return stale
  end
  local now = now_ms()
  observe_duration(base, jkey, now)
  redis.call('ZREM', reserved, id)
  -- One read of the fields the three helpers below start with ('gc' group slot, 'uk'
  -- unique key, 'w' awaited): most jobs have none of them, and every job passes here.
  local held = redis.call('HMGET', jkey, 'gc', 'uk', 'w')
  if held[1] then
    group_slot_free(base, jkey)
  end
  redis.call('HSET', jkey, 's', 'succeeded', 'finished_at', now, 'result', result)
  redis.call('HDEL', jkey, 'error')
  redis.call('HINCRBY', stats, 'succeeded', 1)
  if held[2] then
    release_unique(base, jkey, id)
  end
  count_finished(base, 's', now)
  if held[3] then
    wake_waiters(base, jkey, id)
  end
  if ttl > 0 then
    local succeeded = base .. 'succeeded'
    redis.call('ZADD', succeeded, now, id)
    redis.call('ZREMRANGEBYRANK', succeeded, 0, -1001)
    redis.call('EXPIRE', jkey, ttl)
  else
    redis.call('DEL', jkey)
  end
  return nil
end
