-- reserve: hand the next job to a worker under a lease and a new fencing token.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives ring:<prio>, group:<prio>:<group>, job:<id>)
-- KEYS[2] prios zset   KEYS[3] reserved zset   KEYS[4] stats hash   KEYS[5] notify list
-- ARGV[1] lease in ms (> 0)   ARGV[2] worker id (stored in the job for visibility)
--
-- Returns false when nothing is queued; otherwise the job's id followed by its
-- whole hash as a flat field/value list (see include/reserve_next.lua for the
-- order and what changes).

--@include reserve_next.lua

local lease = tonumber(ARGV[1])
if not lease or lease <= 0 then
  return redis.error_reply('ERR rqueue reserve: bad lease ' .. tostring(ARGV[1]))
end
return reserve_next(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], lease, ARGV[2])
