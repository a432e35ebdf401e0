-- ack: a running job succeeded; store its result and start its record's TTL.
--
-- KEYS[1] queue base (derives unique:<key>, throughput, succeeded, durations, done:<id>,
--         grouprun, groupfull, parked:<group>, group:<prio>:<group>, ring:<prio>, prios,
--         notify, paused for the job's group slot: include/group_slot_free.lua; for a job
--         with dependents, those of include/dep_notify.lua)
-- KEYS[2] job hash
-- KEYS[3] reserved zset   KEYS[4] stats hash
-- ARGV[1] job id   ARGV[2] fencing token   ARGV[3] result (opaque JSON)
-- ARGV[4] result TTL in seconds (0 = delete the record now)
--
-- See include/ack_job.lua for what changes. Returns {'ok'} or
-- {'stale', state, current token} (nothing changed).

--@include ack_job.lua

local ttl = tonumber(ARGV[4])
if not ttl or ttl < 0 then
  return redis.error_reply('ERR rqueue ack: bad result TTL ' .. tostring(ARGV[4]))
end
return ack_job(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ttl) or {'ok'}
