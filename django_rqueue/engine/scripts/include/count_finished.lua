-- count_finished(base, kind, now): add one to this minute's count of
-- succeeded (kind 's') or finally failed (kind 'f') jobs, for the admin chart.
-- Derived key: base .. 'throughput', a hash used as a ring of 60 minute slots:
-- m<slot> = the minute (ms // 60000) the slot holds, s<slot> and f<slot> its
-- counts, slot = minute % 60; a slot is reset when a new minute reaches it,
-- so the hash never holds more than 180 fields.
local function count_finished(base, kind, now)
  local key = base .. 'throughput'
  local minute = math.floor(now / 60000)
  local slot = minute % 60
  if tonumber(redis.call('HGET', key, 'm' .. slot)) ~= minute then
    redis.call('HSET', key, 'm' .. slot, minute, 's' .. slot, 0, 'f' .. slot, 0)
  end
  redis.call('HINCRBY', key, kind .. slot, 1)
end
