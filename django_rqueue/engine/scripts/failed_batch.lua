-- failed_batch: retry or delete one batch of the failed store ("retry all",
-- "delete all"), optionally only the jobs of one name. The caller loops,
-- one bounded call per batch, so 100 000 failed jobs never sit in memory.
--
-- KEYS[1] queue base (derives job:<id>, group:<prio>:<group>, ring:<prio>, unique:<key>,
--         done:<id>, and for a corrupt job with dependents those of include/dep_notify.lua)
-- KEYS[2] failed zset   KEYS[3] prios zset   KEYS[4] stats hash   KEYS[5] notify list
-- ARGV[1] mode: 'retry' (re-queue with attempts 0, as retry.lua) or 'delete'
--         (remove the record, as cancel.lua in mode delete, waking its waiters)
-- ARGV[2] batch limit (> 0)   ARGV[3] offset: failed jobs to skip first (the
--         ones earlier batches kept because their name did not match)
-- ARGV[4] only jobs that failed at or before this time (ms; the time the bulk
--         action started, so a job that fails again meanwhile is not redone)
-- ARGV[5] job name filter ('' = every job)
--
-- Walks `failed` oldest first. An id whose record is gone, or not in state
-- failed, is dropped from `failed` (counted as stale). A record that is not a hash
-- (include/record_problem.lua) is deleted in mode delete (counted as done); in mode
-- retry it is made a failed record saying so (include/fail_corrupt.lua; its failed-at
-- becomes now, after ARGV[4], so later batches pass over it) and counted as stale.
-- A node of a workflow (field 'wf') is not retried here (counted as skipped: its
-- workflow's retry_failed() re-runs it); deleting one tells its dependents nothing (it
-- told them when it failed).
-- Returns {done, skipped (name did not match, or a workflow's node in mode retry), stale,
-- scanned}; the caller stops when scanned < limit and adds skipped to its next offset.

--@include fail_corrupt.lua
--@include now_ms.lua
--@include push_queued.lua
--@include record_problem.lua
--@include release_unique.lua
--@include wake_waiters.lua

local base, failed, prios, stats, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode, limit, offset = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local upto, name = tonumber(ARGV[4]), ARGV[5]
if (mode ~= 'retry' and mode ~= 'delete') or not limit or limit <= 0 or not offset
    or offset < 0 or not upto then
  return redis.error_reply('ERR rqueue failed_batch: bad mode/limit/offset/upto')
end
local ids = redis.call('ZRANGE', failed, '-inf', upto, 'BYSCORE', 'LIMIT', offset, limit)
local done, skipped, stale = 0, 0, 0
local now = now_ms()
for _, id in ipairs(ids) do
  local jkey = base .. 'job:' .. id
  local job = redis.pcall('HMGET', jkey, 's', 'prio', 'group', 'n', 'wf')
  if job.err and mode == 'delete' then
    redis.call('ZREM', failed, id)
    redis.call('DEL', jkey)
    done = done + 1
  elseif job.err then
    fail_corrupt(base, jkey, stats, id, now, record_problem(jkey))
    stale = stale + 1
  elseif job[1] ~= 'failed' then
    redis.call('ZREM', failed, id)
    stale = stale + 1
  elseif (name ~= '' and job[4] ~= name) or (job[5] and mode == 'retry') then
    skipped = skipped + 1
  else
    redis.call('ZREM', failed, id)
    if mode == 'retry' then
      redis.call('HSET', jkey, 's', 'queued', 'attempts', 0, 'due', now)
      redis.call('HDEL', jkey, 'finished_at')
      redis.call('PERSIST', jkey)
      push_queued(base, prios, stats, notify, id, job[2], job[3])
    else
      release_unique(base, jkey, id)
      wake_waiters(base, jkey, id)
      redis.call('DEL', jkey)
    end
    done = done + 1
  end
end
return {done, skipped, stale, #ids}
