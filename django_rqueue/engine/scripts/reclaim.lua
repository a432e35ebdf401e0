-- reclaim: take back jobs whose lease expired (their worker died or hung).
--
-- KEYS[1] queue base (derives job:<id>, group:<prio>:<group>, ring:<prio>, unique:<key>,
--         throughput, done:<id>, grouprun, groupfull, parked:<group>, and for a job with
--         dependents those of include/dep_notify.lua)
-- KEYS[2] reserved zset   KEYS[3] prios zset   KEYS[4] failed zset
-- KEYS[5] stats hash      KEYS[6] notify list
-- ARGV[1] batch limit (> 0)
-- ARGV[2] error recorded for the lost attempt (a JSON object, "lease expired"; its
--         "worker" key is set here to the worker that held the lease)
-- ARGV[3] failed TTL in ms (-1 = keep forever)   ARGV[4] failed jobs kept at most (-1 = no cap)
-- ARGV[5] most old failed jobs deleted by this call (> 0)
--
-- The lost attempt counts (attempts was incremented at reserve); the token
-- is bumped so the lost holder can no longer renew, ack or fail. A job with
-- attempts left is queued again at once; one without goes to `failed`, and
-- then the failed store's retention (ARGV[3..5], include/trim_failed.lua) is
-- applied once for the call; one with dependents ('nx') delivers that final failure, with
-- its new token and the lost attempt's error, to them (include/dep_notify.lua). Either way the lost attempt's group slot is given
-- back (include/group_slot_free.lua). The jobs reclaimed (requeued or failed) are
-- counted in the stats hash's 'reclaimed', with one HINCRBY for the call.
-- A record that is not a hash or has no state goes to the failed store
-- (include/fail_corrupt.lua; counted as failed; a hash gives its group slot back, a record
-- of another type cannot say which group it held one of); attempts that are not a whole number
-- count as used up, a 'max' that is not one as the default.
-- Returns {requeued count, failed count, ms until the next lease deadline or
-- -1 when nothing is reserved; 0 when the batch was full}.

--@include add_count.lua
--@include fail_corrupt.lua
--@include group_slot_free.lua
--@include move_to_failed.lua
--@include now_ms.lua
--@include push_queued.lua
--@include record_error.lua
--@include read_record.lua
--@include stored_default.lua
--@include trim_failed.lua
--@include whole.lua

-- The lost attempt's error record names the worker that held it, as the
-- records made in Python do (django_rqueue.execution.error_record).
local function with_worker(err, worker)
  if not worker then
    return err
  end
  local record = cjson.decode(err)
  record['worker'] = worker
  return cjson.encode(record)
end

local base, reserved, prios, failed, stats, notify =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local limit = tonumber(ARGV[1])
local ttl, cap, trim_limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue reclaim: bad limit ' .. tostring(ARGV[1]))
end
if not ttl or not cap or not trim_limit or trim_limit <= 0 then
  return redis.error_reply('ERR rqueue reclaim: bad failed TTL/max/limit')
end
local now = now_ms()
local expired = redis.call('ZRANGE', reserved, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
local requeued, failed_count = 0, 0
for _, id in ipairs(expired) do
  redis.call('ZREM', reserved, id)
  local jkey = base .. 'job:' .. id
  local job, problem = read_record(jkey, 's', 'attempts', 'max', 'prio', 'group', 'worker', 'token',
                                   'nx', 'n')
  if problem then
    if not job.err then  -- a hash without its state may still hold its group slot
      group_slot_free(base, jkey)
    end
    fail_corrupt(base, jkey, stats, id, now, problem)
    failed_count = failed_count + 1
  elseif job[1] == 'running' then
    -- Fence off the lost holder: its renew/ack/fail now carry a stale token.
    local token = whole(job[7], 0) + 1
    redis.call('HSET', jkey, 'token', token)
    group_slot_free(base, jkey)
    local err = with_worker(ARGV[2], job[6])
    record_error(jkey, err, now)
    local max = whole(stored_default('max', job[3]), RECORD_DEFAULTS.max)
    if whole(job[2], max) >= max then
      local links = nil
      if job[8] then  -- the new token: the lost holder's is stale everywhere now
        links = {job[8], token, job[9], err}
      end
      move_to_failed(base, jkey, failed, stats, id, now, links)
      failed_count = failed_count + 1
    else
      redis.call('HSET', jkey, 's', 'queued')
      redis.call('HDEL', jkey, 'worker')
      push_queued(base, prios, stats, notify, id, job[4], job[5])
      requeued = requeued + 1
    end
  end
end
if requeued + failed_count > 0 then
  add_count(stats, 'reclaimed', requeued + failed_count)
end
if failed_count > 0 then
  trim_failed(base, failed, stats, now, ttl, cap, trim_limit)
end
if #expired == limit then
  return {requeued, failed_count, 0}
end
local head = redis.call('ZRANGE', reserved, 0, 0, 'WITHSCORES')
if head[2] == nil then
  return {requeued, failed_count, -1}
end
return {requeued, failed_count, math.max(0, tonumber(head[2]) - now)}
