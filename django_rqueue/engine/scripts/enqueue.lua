-- enqueue: create a job, queued now or scheduled for later; optionally unique.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives group:<prio>:<group>, ring:<prio>,
--         job:<holder id> for the unique check)
-- KEYS[2] job hash          KEYS[3] prios zset      KEYS[4] delayed zset
-- KEYS[5] stats hash        KEYS[6] notify list     KEYS[7] wake list
-- KEYS[8] unique key (string; only read/written when ARGV[6] is not empty)
-- ARGV[1] job id            ARGV[2] priority (integer -100..100)
-- ARGV[3] group ('' = the default group)
-- ARGV[4] delay in ms (>= 0), ignored when ARGV[5] >= 0
-- ARGV[5] run-at in ms since the epoch (absolute, UTC), or -1
-- ARGV[6] unique key ('' = none)   ARGV[7] unique TTL in seconds (0 = until terminal)
-- ARGV[8..] field, value pairs copied into the job hash ('n', 'p', 'max', 'tmo', 'ttl')
--
-- Returns {outcome, job id, state} (see include/enqueue_job.lua): 'created',
-- 'duplicate' (with the holder's id) or 'exists'.
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
if (#ARGV - 7) % 2 ~= 0 then
  return redis.error_reply('ERR rqueue enqueue: odd number of field arguments')
end
return enqueue_job(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                   ARGV[1], tostring(prio), ARGV[3], delay, run_at, ARGV[6], unique_ttl,
                   ARGV, 8, #ARGV)
