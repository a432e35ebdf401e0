-- schedule_due: the periodic entries of one queue whose next tick has come (read only).
--
-- KEYS[1] schedule zset (entry -> next tick, ms since the epoch)
-- ARGV[1] limit (> 0): at most this many entries per call
--
-- Returns {now ms (Redis clock), next ms, entry, tick ms, entry, tick ms, ...}: the due
-- entries (tick <= now), earliest first, and in `next` the tick of the first entry
-- not due yet (-1 when there is none; 0 when the batch is full and more may be due).
-- O(log n + due): entries that are not due cost nothing. The caller claims each
-- due tick with schedule_claim.lua.

--@include now_ms.lua

local schedule = KEYS[1]
local limit = tonumber(ARGV[1])
if not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue schedule_due: bad limit ' .. tostring(ARGV[1]))
end
local now = now_ms()
local due = redis.call('ZRANGE', schedule, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit,
                       'WITHSCORES')
local reply = {now, -1}
for i = 1, #due, 2 do
  reply[#reply + 1] = due[i]
  reply[#reply + 1] = due[i + 1]
end
if #due / 2 == limit then
  reply[2] = 0
else
  local head = redis.call('ZRANGE', schedule, '(' .. now, '+inf', 'BYSCORE', 'LIMIT', 0, 1,
                          'WITHSCORES')
  if head[2] then
    reply[2] = head[2]
  end
end
return reply
