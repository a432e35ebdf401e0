-- trim_failed: apply the failed store's retention (failed_ttl, failed_max) now. The
-- poller runs it periodically, so old failures go even when no new failure arrives
-- (fail.lua and reclaim.lua apply the same retention whenever a job enters the store).
--
-- KEYS[1] queue base (derives job:<id>, done:<id>)   KEYS[2] failed zset   KEYS[3] stats hash
-- ARGV[1] failed TTL in ms (-1 = keep forever)   ARGV[2] failed jobs kept at most (-1 = no cap)
-- ARGV[3] most failed jobs deleted by this call (> 0)
--
-- See include/trim_failed.lua for what is deleted. Returns {deleted count, 1 when the
-- call reached its limit (call again: more may be due), else 0}.

--@include now_ms.lua
--@include trim_failed.lua

local ttl, cap, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not ttl or not cap or not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue trim_failed: bad TTL/max/limit')
end
local deleted, taken = trim_failed(KEYS[1], KEYS[2], KEYS[3], now_ms(), ttl, cap, limit)
if taken == limit then
  return {deleted, 1}
end
return {deleted, 0}
