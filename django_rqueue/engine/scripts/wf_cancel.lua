-- wf_cancel: Workflow.cancel() for the nodes of one queue (never the finisher: it still
-- runs, and closes the workflow 'cancelled').
--
-- KEYS[1] queue base (derives job:<id>, and the keys of include/cancel_job.lua: waiting,
--         group:<prio>:<group>, ring:<prio>, parked:<group>, unique:<key>, done:<id>, and
--         for a job with dependents those of include/dep_notify.lua)
-- KEYS[2] delayed zset   KEYS[3] failed zset   KEYS[4] prios zset   KEYS[5] stats hash
-- ARGV[1] seconds to keep a cancelled record whose own result TTL ('ttl') is 0 or unset
--         (> 0)   ARGV[2..] node ids of this queue
--
-- Per id: a waiting, scheduled or queued node ends cancelled with 'cancel_reason'
-- 'workflow_cancelled' and tells its dependents (include/cancel_job.lua); a running one
-- is asked to stop ('cx' the Redis time in ms of the first request, kept by a repeat, and
-- 'cxw' 1), so its worker's master stops it and cancel_running.lua ends it with that
-- reason and tells its dependents; a node that has ended, is missing or is corrupt is
-- left alone. Idempotent: a repeat finds ended nodes, or running ones asked already.
-- Returns {cancelled, requested}: the nodes cancelled now, the running nodes asked to stop.

--@include cancel_job.lua
--@include now_ms.lua
--@include read_record.lua

local base, delayed, failed, prios, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ttl = tonumber(ARGV[1])
if not ttl or ttl <= 0 then
  return redis.error_reply('ERR rqueue wf_cancel: bad TTL ' .. tostring(ARGV[1]))
end
local PENDING = {waiting = true, scheduled = true, queued = true}
local cancelled, requested = 0, 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local jkey = base .. 'job:' .. id
  local job = read_record(jkey, 's', 'prio', 'group', 'nx', 'n', 'token', 'ttl')
  local st = job[1]
  if st == 'running' then
    redis.call('HSETNX', jkey, 'cx', now_ms())
    redis.call('HSET', jkey, 'cxw', 1)
    requested = requested + 1
  elseif PENDING[st] then
    local own = tonumber(job[7])
    local keep = ttl
    if own and own > 0 then
      keep = own
    end
    cancel_job(base, jkey, delayed, failed, prios, stats, id, job, 'cancel', keep,
               'workflow_cancelled')
    cancelled = cancelled + 1
  end
end
return {cancelled, requested}
