-- now_ms(): the Redis server's clock in milliseconds (TIME), the only clock
-- any scheduling decision uses.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
