-- observe_duration(base, jkey, now): count the attempt of the running job `jkey` that
-- ends at `now` (ms, Redis clock) in its job name's duration histogram: duration =
-- now - 'started_at' (set by the reserve), in ms. Called by fail.lua; the ack
-- (include/ack_job.lua) reads those fields with its others and calls count_duration.
--
-- Derived key: base .. 'durations', a hash of one histogram per job name (names as in
-- django_rqueue.engine.fields.DurationFields): '<bound>:<job name>' counts the attempts
-- that lasted more than the previous bound and at most <bound> ms ('inf': longer than
-- the last bound), 'sum:<job name>' the ms they lasted in all. Only the one bucket the
-- attempt falls in is incremented (the reader cumulates them, and the count is their
-- sum), so an observation costs an HMGET and two HINCRBY (an ack reads the name and
-- 'started_at' with its other fields and calls count_duration). The part before the
-- first ':' never holds one, so a job name may hold any character ('task:<path>' does).
--@include count_duration.lua
local function observe_duration(base, jkey, now)
  local job = redis.call('HMGET', jkey, 'n', 'started_at')
  count_duration(base, job[1], job[2], now)
end
