-- ack_reserve: ack a running job and reserve the next one of the same queue,
-- in one round trip (BullMQ's moveToFinished does the same with fetchNext).
--
-- KEYS[1] queue base (derives unique:<key>, throughput, succeeded, durations, done:<acked id>,
--         ring:<prio>, group:<prio>:<group>, job:<next id>, grouprun, groupfull,
--         parked:<group>, and for an acked job with dependents those of
--         include/dep_notify.lua)   KEYS[2] job hash of the acked job
-- KEYS[3] reserved zset   KEYS[4] stats hash   KEYS[5] prios zset   KEYS[6] notify list
-- KEYS[7] reservation record "<base>reservation:<request id>" (string; only with ARGV[8])
-- ARGV[1] job id   ARGV[2] fencing token   ARGV[3] result (opaque JSON)
-- ARGV[4] result TTL in seconds (0 = delete the record now)
-- ARGV[5] lease in ms (> 0) for the next jobs   ARGV[6] worker id
-- ARGV[7] how many jobs to reserve at most (1..1000; default 1)
-- ARGV[8] request id ('' = none): the same request again acks nothing new (acks
--         are idempotent) and returns the same jobs (include/reserve_batch.lua)
-- ARGV[9] group concurrency cap for the next jobs (integer >= 0; 0 or absent = no
--         cap; include/reserve_next.lua)
-- ARGV[10] the queue's rate limit: ms between two jobs (> 0; '' or absent = no limit)
-- ARGV[11] its tolerance in ms (>= 0; with ARGV[10]); see include/rate_allowance.lua
--
-- The ack is exactly ack.lua's (include/ack_job.lua), the reservations exactly
-- reserve.lua's (include/reserve_next.lua); the next jobs are reserved even
-- when the ack was stale. The ack gives its group slot back first, so the
-- next job may be of the same group. Returns {ack reply, wait, reservation, ...}:
-- the ack reply is {'ok'} or {'stale', state, current token}; `wait` as
-- reserve.lua's (0, or the ms until the rate limit lets the next job go); then
-- zero or more reservations, each the id followed by the job hash's
-- field/value list.

--@include ack_job.lua
--@include reserve_batch.lua

local base, jkey, reserved, stats, prios, notify =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local ttl, lease, count = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7] or '1')
local cap = tonumber(ARGV[9] or '0')
local interval, tolerance = tonumber(ARGV[10] or ''), tonumber(ARGV[11] or '0')
if not ttl or ttl < 0 then
  return redis.error_reply('ERR rqueue ack_reserve: bad result TTL ' .. tostring(ARGV[4]))
end
if not lease or lease <= 0 then
  return redis.error_reply('ERR rqueue ack_reserve: bad lease ' .. tostring(ARGV[5]))
end
if not count or count ~= math.floor(count) or count < 1 or count > 1000 then
  return redis.error_reply('ERR rqueue ack_reserve: bad count ' .. tostring(ARGV[7]))
end
if not cap or cap ~= math.floor(cap) or cap < 0 then
  return redis.error_reply('ERR rqueue ack_reserve: bad group cap ' .. tostring(ARGV[9]))
end
if interval and (interval <= 0 or not tolerance or tolerance < 0) then
  return redis.error_reply('ERR rqueue ack_reserve: bad rate limit ' .. tostring(ARGV[10]) .. ' '
                           .. tostring(ARGV[11]))
end
local acked = ack_job(base, jkey, reserved, stats, ARGV[1], ARGV[2], ARGV[3], ttl) or {'ok'}
local got, wait = reserve_batch(base, prios, reserved, stats, notify, lease, ARGV[6], count,
                                KEYS[7] or '', ARGV[8] or '', cap, interval, tolerance)
local reply = {acked, wait}
for i = 1, #got do
  reply[#reply + 1] = got[i]
end
return reply
