-- renew: extend the lease of a running job, fenced by its token.
--
-- KEYS[1] job hash   KEYS[2] reserved zset
-- ARGV[1] job id     ARGV[2] fencing token   ARGV[3] lease in ms (> 0)
--
-- Returns {'ok', new deadline ms} or {'stale', state, current token} (nothing changed).

--@include check_token.lua
--@include now_ms.lua

local jkey, reserved = KEYS[1], KEYS[2]
local lease = tonumber(ARGV[3])
if not lease or lease <= 0 then
  return redis.error_reply('ERR rqueue renew: bad lease ' .. tostring(ARGV[3]))
end
local stale = check_token(jkey, ARGV[2])
if stale then
  return stale
end
local deadline = now_ms() + lease
redis.call('ZADD', reserved, 'XX', deadline, ARGV[1])
return {'ok', deadline}
