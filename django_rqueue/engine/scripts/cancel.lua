-- cancel: withdraw a job that is not running (waiting, scheduled, queued or failed), ask
-- the worker of a running one to stop it, or delete any job that is not running.
--
-- KEYS[1] queue base (derives group:<prio>:<group>, ring:<prio>, unique:<key>, done:<id>,
--         waiting, and for a job with dependents those of include/dep_notify.lua)
-- KEYS[2] job hash   KEYS[3] delayed zset   KEYS[4] failed zset
-- KEYS[5] prios zset   KEYS[6] stats hash
-- ARGV[1] job id   ARGV[2] mode: 'cancel' (keep the record as cancelled for
-- ARGV[3] seconds) or 'delete' (remove the record)   ARGV[3] TTL in seconds (> 0)
--
-- Returns {'ok', previous state} or {'state', current state ('' when missing)}
-- when the job is running (mode delete) or already finished (mode cancel).
-- Either mode wakes the job's waiters (include/wake_waiters.lua).
-- Mode cancel on a running job changes only its field 'cx' (the Redis time in ms
-- of the first request; a repeated request keeps it) and returns {'requested',
-- 'running'}: its worker's master sees the field, stops the job, and ends it with
-- cancel_running.lua. The transition itself is include/cancel_job.lua's: a waiting,
-- scheduled or queued job with dependents tells them it was cancelled ('deleted' in mode
-- delete).
-- A record that is not a hash or has no state (include/record_problem.lua) cannot be
-- cancelled ({'state', 'corrupt'}); mode delete deletes it (and its id from `delayed`
-- and `failed`; an id left in a group list is skipped by reserves) and returns
-- {'ok', 'corrupt'}.

--@include cancel_job.lua
--@include read_record.lua

local base, jkey, delayed, failed, prios, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id, mode, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if (mode ~= 'cancel' and mode ~= 'delete') or not ttl or ttl <= 0 then
  return redis.error_reply('ERR rqueue cancel: bad mode or TTL')
end
local job, problem = read_record(jkey, 's', 'prio', 'group', 'nx', 'n', 'token')
local st = job[1]
if problem then
  st = CORRUPT_STATE
  if mode == 'cancel' then
    return {'state', st}
  end
  redis.call('ZREM', delayed, id)
  redis.call('ZREM', failed, id)
  redis.call('DEL', jkey)
  return {'ok', st}
end
return cancel_job(base, jkey, delayed, failed, prios, stats, id, job, mode, ttl, '')
