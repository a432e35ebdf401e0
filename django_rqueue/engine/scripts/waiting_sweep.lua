-- waiting_sweep: the dependency deadline, enforced by the pollers: end the waiting jobs of
-- one queue whose deadline (their score in `waiting`) has passed.
--
-- KEYS[1] queue base (derives job:<id>, unique:<key>, done:<id>, and for a job with
--         dependents those of include/dep_notify.lua)
-- KEYS[2] waiting zset   KEYS[3] stats hash
-- ARGV[1] batch limit (> 0): at most this many due ids per call
--
-- Per due id (score <= now, the oldest first): a job that is not waiting any more (or a
-- record that is gone or not a hash) only leaves `waiting`. A job whose gate never
-- opened ('gt' set) and that belongs to no workflow (no 'wf': a standalone depends_on job
-- whose client died before opening the gate) is aborted: its record deleted, its unique
-- key released, nothing counted (for its caller it was never created); its parents'
-- deliveries to it later find no job. Any other is cancelled with 'cancel_reason'
-- 'dependency_timeout', counted in stats 'deptimeout', and tells its dependents, as a
-- cancel does (include/cancel_job.lua: kind 'c'); its record expires after its result TTL
-- ('ttl', 0 deletes it). A gated workflow node past its deadline is cancelled, not
-- aborted: the workflow's recovery owns rollbacks (its 'wfopen' sweep).
-- Any number of pollers may sweep at once: the state check makes a second sweep of an id
-- a no-op.
-- Returns {cancelled, aborted, ms until the next deadline (-1: none; 0: the batch was
-- full, more may be due)}.

--@include add_count.lua
--@include cancel_job.lua
--@include now_ms.lua
--@include release_unique.lua
--@include stored_default.lua
--@include wake_waiters.lua

local base, waiting, stats = KEYS[1], KEYS[2], KEYS[3]
local limit = tonumber(ARGV[1])
if not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue waiting_sweep: bad limit ' .. tostring(ARGV[1]))
end
local now = now_ms()
local due = redis.call('ZRANGE', waiting, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
local cancelled, aborted = 0, 0
for _, id in ipairs(due) do
  local jkey = base .. 'job:' .. id
  local job = redis.pcall('HMGET', jkey, 's', 'gt', 'wf', 'nx', 'n', 'token', 'ttl')
  if job.err or job[1] ~= 'waiting' then
    redis.call('ZREM', waiting, id)
  elseif job[2] and not job[3] then
    redis.call('ZREM', waiting, id)
    release_unique(base, jkey, id)
    wake_waiters(base, jkey, id)
    redis.call('DEL', jkey)
    aborted = aborted + 1
  else
    local ttl = tonumber(stored_default('ttl', job[7])) or 0
    -- A waiting job is in no other structure: cancel_job needs no delayed, failed or prios.
    cancel_job(base, jkey, nil, nil, nil, stats, id, {'waiting', nil, nil, job[4], job[5], job[6]},
               'cancel', ttl, 'dependency_timeout')
    add_count(stats, 'deptimeout', 1)
    cancelled = cancelled + 1
  end
end
if #due == limit then
  return {cancelled, aborted, 0}
end
local head = redis.call('ZRANGE', waiting, 0, 0, 'WITHSCORES')
local next_at = tonumber(head[2] or '')
if not next_at or next_at == math.huge then
  return {cancelled, aborted, -1}
end
return {cancelled, aborted, math.max(0, next_at - now)}
