-- count_duration(base, name, started, now): count an attempt of job `name` that started
-- at `started` ('started_at', ms, as the caller read it) and ends at `now` (ms, Redis
-- clock) in that name's duration histogram (see include/observe_duration.lua for the
-- hash); nothing is counted when either is missing. An ack reads the name and
-- 'started_at' with its other fields and calls this directly.
-- DURATION_BOUNDS must equal DurationFields.BUCKETS_MS (tests/engine/test_keys.py).
local DURATION_BOUNDS = {5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500,
                         10000, 30000, 60000, 300000, 600000, 1800000, 3600000}
local function count_duration(base, name, started, now)
  started = tonumber(started)
  if not name or not started then
    return
  end
  local ms = math.max(0, now - started)
  local bucket = 'inf'
  for _, bound in ipairs(DURATION_BOUNDS) do
    if ms <= bound then
      bucket = tostring(bound)
      break
    end
  end
  local key = base .. 'durations'
  redis.call('HINCRBY', key, bucket .. ':' .. name, 1)
  redis.call('HINCRBY', key, 'sum:' .. name, ms)
end
