-- ack_job(base, jkey, reserved, stats, id, token, result, ttl): record that
-- the running job `id` succeeded under `token`; nil on success, else the
-- reply {'stale', state, current token} (nothing changed; {'stale', 'corrupt', what is
-- wrong} when the record is not a hash).
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
-- A job with dependents ('nx') delivers its success, with `result`, to them
-- (include/dep_notify.lua) after its state is written and before its record may be
-- deleted; the one HMGET below reads 'nx', so a job without dependents pays nothing more.
-- Derived keys: base .. 'succeeded', base .. 'throughput', base .. 'unique:' .. key,
-- base .. 'done:' .. id, base .. 'durations', and those of include/group_slot_free.lua
-- and (a job with dependents) include/dep_notify.lua.
--@include add_count.lua
--@include count_duration.lua
--@include count_finished.lua
--@include group_slot_free.lua
--@include notify_dependents.lua
--@include now_ms.lua
--@include record_problem.lua
--@include release_unique.lua
--@include token_mismatch.lua
--@include wake_waiters.lua
local function ack_job(base, jkey, reserved, stats, id, token, result, ttl)
  -- One read for the token check, the duration and the fields the helpers below start
  -- with ('gc' group slot, 'uk' unique key, 'w' awaited, 'error', 'nx' dependents): most
  -- jobs have none of the last five, and every job passes here (each redis.call costs more
  -- than its command).
  -- A record that is not a hash is stale to its holder (include/record_problem.lua): the
  -- reclaim of its lease puts it in the failed store.
  local job = redis.pcall('HMGET', jkey, 's', 'token', 'n', 'started_at', 'gc', 'uk', 'w', 'error',
                         'nx')
  if job.err then
    return {'stale', CORRUPT_STATE, record_problem(jkey) or job.err}
  end
  local stale = token_mismatch(job[1], job[2], token)
  if stale then
    return stale
  end
  local now = now_ms()
  count_duration(base, job[3], job[4], now)
  redis.call('ZREM', reserved, id)
  if job[5] then
    group_slot_free(base, jkey)
  end
  redis.call('HSET', jkey, 's', 'succeeded', 'finished_at', now, 'result', result)
  if job[8] then
    redis.call('HDEL', jkey, 'error')
  end
  add_count(stats, 'succeeded', 1)
  if job[6] then
    release_unique(base, jkey, id)
  end
  count_finished(base, 's', now)
  if job[7] then
    wake_waiters(base, jkey, id)
  end
  if job[9] then
    notify_dependents(base, {{id, job[9], 's', token, '', job[3], result}}, now)
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
