-- enqueue: create a job, queued now or scheduled for later; optionally unique.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:"   KEYS[2] job hash
-- KEYS[3] unique key (string; sent only with a unique key, ARGV[6] not empty)
-- ARGV[1] job id            ARGV[2] priority (integer -100..100)
-- ARGV[3] group ('' = the default group)
-- ARGV[4] delay in ms (>= 0), ignored when ARGV[5] >= 0
-- ARGV[5] run-at in ms since the epoch (absolute, UTC), or -1
-- ARGV[6] unique key ('' = none)   ARGV[7] unique TTL in seconds (0 = until terminal)
-- ARGV[8..] field, value pairs copied into the job hash ('n', 'p', and 'max', 'tmo', 'ttl'
--           when not at their defaults)
--
-- Derived keys: base .. 'prios', 'delayed', 'stats', 'notify', 'wake' (the queue's keys
-- of django_rqueue.engine.keys.QueueKeys), and those of include/enqueue_job.lua. They
-- share KEYS[1]'s hash tag, so a Redis Cluster serves them from the same node. They are
-- not sent: every argument costs packing in the client and in Redis, on the path of
-- every .delay().
--
-- Returns {outcome, job id, state} (see include/enqueue_job.lua): 'created' (then
-- a 4th item, the enqueued-at time in ms the record holds), 'duplicate' (with the
-- holder's id) or 'exists'.
-- Writes: job hash; a group list + ring + prios + notify, or delayed + wake; unique key.

--@include enqueue_job.lua

local prio, delay, run_at = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local unique_ttl = tonumber(ARGV[7])
if not prio or prio ~= math.floor(prio) or prio < -100 or prio > 100 then
  return redis.error_reply('ERR rqueue enqueue: bad priority ' .. tostring(ARGV[2]))
end
if not delay or delay < 0 or not run_at or not unique_ttl or unique_ttl < 0 then
  return redis.error_reply('ERR rqueue enqueue: bad delay/run_at/unique_ttl')
end
if ARGV[6] ~= '' and not KEYS[3] then
  return redis.error_reply('ERR rqueue enqueue: a unique key without its KEYS[3]')
end
if (#ARGV - 7) % 2 ~= 0 then
  return redis.error_reply('ERR rqueue enqueue: odd number of field arguments')
end
local base = KEYS[1]
return enqueue_job(base, KEYS[2], base .. 'prios', base .. 'delayed', base .. 'stats',
                   base .. 'notify', base .. 'wake', KEYS[3] or '', ARGV[1], tostring(prio),
                   ARGV[3], delay, run_at, ARGV[6], unique_ttl, ARGV, 8, #ARGV)
