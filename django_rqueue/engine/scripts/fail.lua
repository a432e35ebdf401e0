-- fail: a running attempt failed; schedule a retry or move the job to the failed store.
--
-- KEYS[1] queue base (derives unique:<key>, throughput, durations, done:<id>, job:<id> of old
--         failed jobs, for a job with dependents those of include/dep_notify.lua, and grouprun, groupfull, parked:<group>, group:<prio>:<group>,
--         ring:<prio>, prios, notify, paused for the job's group slot:
--         include/group_slot_free.lua)   KEYS[2] job hash
-- KEYS[3] reserved zset   KEYS[4] delayed zset   KEYS[5] failed zset   KEYS[6] stats hash
-- KEYS[7] wake list
-- ARGV[1] job id   ARGV[2] fencing token   ARGV[3] error (opaque JSON)
-- ARGV[4] retry delay in ms (>= 0), or -1 for "do not retry"
-- ARGV[5] failed TTL in ms (-1 = keep forever)   ARGV[6] failed jobs kept at most (-1 = no cap)
-- ARGV[7] most old failed jobs deleted by this call (> 0)
--
-- A retry happens only when ARGV[4] >= 0 and attempts < 'max'; it waits in
-- `delayed` (state scheduled) and is counted in the stats hash's 'retried'.
-- Otherwise the job goes to `failed`, and the failed store's retention
-- (ARGV[5..7], include/trim_failed.lua) is applied; a job with dependents ('nx') then
-- delivers its failure, with ARGV[3], to them (include/dep_notify.lua): only the final
-- failure, a retry is not an end.
-- Either way the job's group slot is given back (include/group_slot_free.lua) and
-- the attempt's duration is counted (include/observe_duration.lua).
-- Attempts that are not a whole number count as used up, a 'max' that is not one as
-- the default.
-- Returns {'retrying', run-at ms}, {'failed'}, or {'stale', state, token} (state
-- 'corrupt' when the record is not a hash; nothing changed).

--@include add_count.lua
--@include add_delayed.lua
--@include check_token.lua
--@include group_slot_free.lua
--@include move_to_failed.lua
--@include now_ms.lua
--@include observe_duration.lua
--@include record_error.lua
--@include stored_default.lua
--@include trim_failed.lua
--@include whole.lua

local base, jkey, reserved, delayed, failed, stats, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local id, delay = ARGV[1], tonumber(ARGV[4])
local ttl, cap, limit = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if not delay then
  return redis.error_reply('ERR rqueue fail: bad retry delay ' .. tostring(ARGV[4]))
end
if not ttl or not cap or not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue fail: bad failed TTL/max/limit')
end
local stale = check_token(jkey, ARGV[2])
if stale then
  return stale
end
local now = now_ms()
observe_duration(base, jkey, now)
redis.call('ZREM', reserved, id)
group_slot_free(base, jkey)
record_error(jkey, ARGV[3], now)
local counts = redis.call('HMGET', jkey, 'attempts', 'max', 'nx', 'n')
local max = whole(stored_default('max', counts[2]), RECORD_DEFAULTS.max)
if delay >= 0 and whole(counts[1], max) < max then
  local run_at = now + delay
  redis.call('HSET', jkey, 's', 'scheduled', 'due', run_at)
  redis.call('HDEL', jkey, 'worker')
  add_count(stats, 'retried', 1)
  add_delayed(delayed, wake, id, run_at)
  return {'retrying', run_at}
end
local links = nil
if counts[3] then
  links = {counts[3], ARGV[2], counts[4], ARGV[3]}
end
move_to_failed(base, jkey, failed, stats, id, now, links)
trim_failed(base, failed, stats, now, ttl, cap, limit)
return {'failed'}
