-- ack_reserve: ack a running job and reserve the next one of the same queue,
-- in one round trip (BullMQ's moveToFinished does the same with fetchNext).
--
-- KEYS[1] queue base (derives unique:<key>, throughput, succeeded, ring:<prio>,
--         group:<prio>:<group>, job:<next id>)   KEYS[2] job hash of the acked job
-- KEYS[3] reserved zset   KEYS[4] stats hash   KEYS[5] prios zset   KEYS[6] notify list
-- ARGV[1] job id   ARGV[2] fencing token   ARGV[3] result (opaque JSON)
-- ARGV[4] result TTL in seconds (0 = delete the record now)
-- ARGV[5] lease in ms (> 0) for the next job   ARGV[6] worker id
--
-- The ack is exactly ack.lua's (include/ack_job.lua), the reservation exactly
-- reserve.lua's (include/reserve_next.lua); the next job is reserved even
-- when the ack was stale. Returns {ack reply, reservation}: the ack reply is
-- {'ok'} or {'stale', state, current token}; the reservation is 0 when
-- nothing is queued, else the id followed by the job hash's field/value list.

--@include ack_job.lua
--@include reserve_next.lua

local base, jkey, reserved, stats, prios, notify =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local ttl, lease = tonumber(ARGV[4]), tonumber(ARGV[5])
if not ttl or ttl < 0 then
  return redis.error_reply('ERR rqueue ack_reserve: bad result TTL ' .. tostring(ARGV[4]))
end
if not lease or lease <= 0 then
  return redis.error_reply('ERR rqueue ack_reserve: bad lease ' .. tostring(ARGV[5]))
end
local acked = ack_job(base, jkey, reserved, stats, ARGV[1], ARGV[2], ARGV[3], ttl) or {'ok'}
local next_job = reserve_next(base, prios, reserved, stats, notify, lease, ARGV[6]) or 0
return {acked, next_job}
