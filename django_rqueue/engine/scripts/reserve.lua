-- reserve: hand the next job to a worker under a lease and a new fencing token.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives ring:<prio>, group:<prio>:<group>, job:<id>,
--         grouprun, groupfull, parked:<group>, and unique:<key>, done:<id> of an
--         expired job, and for an expired or corrupt job with dependents those of
--         include/dep_notify.lua)
-- KEYS[2] prios zset   KEYS[3] reserved zset   KEYS[4] stats hash   KEYS[5] notify list
-- KEYS[6] reservation record "<base>reservation:<request id>" (string; only with ARGV[4])
-- ARGV[1] lease in ms (> 0)   ARGV[2] worker id (stored in the job for visibility)
-- ARGV[3] how many jobs to reserve at most (1..1000; default 1)
-- ARGV[4] request id ('' = none): the same request again returns the same jobs
--         (include/reserve_batch.lua)
-- ARGV[5] group concurrency cap: at most this many running jobs per group
--         (integer >= 0; 0 or absent = no cap; include/reserve_next.lua)
-- ARGV[6] the queue's rate limit: ms between two jobs (> 0; '' or absent = no limit)
-- ARGV[7] its tolerance in ms (>= 0; with ARGV[6]); see include/rate_allowance.lua
--
-- Returns {wait, reservation, reservation, ...}: `wait` is 0, or, when the
-- queue's rate limit handed out fewer than ARGV[3] jobs while more are queued,
-- the ms until the next one may go. Then the reservations, in reservation
-- order, none when nothing is queued; each is the job's id followed by its
-- whole hash as a flat field/value list (see include/reserve_next.lua for the
-- order and what changes; a job whose expiry has come is ended, not reserved).
-- Every job gets its own lease and fencing token.

--@include reserve_batch.lua

local lease, count, cap = tonumber(ARGV[1]), tonumber(ARGV[3] or '1'), tonumber(ARGV[5] or '0')
local interval, tolerance = tonumber(ARGV[6] or ''), tonumber(ARGV[7] or '0')
if not lease or lease <= 0 then
  return redis.error_reply('ERR rqueue reserve: bad lease ' .. tostring(ARGV[1]))
end
if not count or count ~= math.floor(count) or count < 1 or count > 1000 then
  return redis.error_reply('ERR rqueue reserve: bad count ' .. tostring(ARGV[3]))
end
if not cap or cap ~= math.floor(cap) or cap < 0 then
  return redis.error_reply('ERR rqueue reserve: bad group cap ' .. tostring(ARGV[5]))
end
if interval and (interval <= 0 or not tolerance or tolerance < 0) then
  return redis.error_reply('ERR rqueue reserve: bad rate limit ' .. tostring(ARGV[6]) .. ' '
                           .. tostring(ARGV[7]))
end
local got, wait = reserve_batch(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], lease, ARGV[2],
                                count, KEYS[6] or '', ARGV[4] or '', cap, interval, tolerance)
local reply = {wait}
for i = 1, #got do
  reply[i + 1] = got[i]
end
return reply
