-- observe_duration(base, jkey, now): count the attempt of the running job `jkey` that
-- ends at `now` (ms, Redis clock) in its job name's duration histogram: duration =
-- now - 'started_at' (set by the reserve), in ms. Called by the transitions that end an
-- attempt as its worker reports it: ack (include/ack_job.lua) and fail.lua.
--
-- Derived key: base .. 'durations', a hash of one histogram per job name (names as in
-- django_rqueue.engine.keys.DurationFields): '<bound>:<job name>' counts the attempts
-- that lasted more than the previous bound and at most <bound> ms ('inf': longer than
-- the last bound), 'sum:<job name>' the ms they lasted in all. Only the one bucket the
-- attempt falls in is incremented (the reader cumulates them, and the count is their
-- sum), so an observation costs an HMGET and two HINCRBY. The part before the first
-- ':' never holds one, so a job name may hold any character ('task:<path>' does).
-- DURATION_BOUNDS must equal DurationFields.BUCKETS_MS (tests/engine/test_keys.py).
local DURATION_BOUNDS = {5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500,
                         10000, 30000, 60000, 300000, 600000, 1800000, 3600000}
local function observe_duration(base, jkey, now)
  local job = redis.call('HMGET', jkey, 'n', 'started_at')
  local started = tonumber(job[2])
  if not job[1] or not started then
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
  redis.call('HINCRBY', key, bucket .. ':' .. job[1], 1)
  redis.call('HINCRBY', key, 'sum:' .. job[1], ms)
end
