-- schedule_claim: claim one due tick of a periodic entry and enqueue its job, atomically.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives group:<prio>:<group>, ring:<prio>,
--         job:<holder id> for the unique check)
-- KEYS[2] schedule zset (entry -> next tick ms)   KEYS[3] the entry's state hash
-- KEYS[4] job hash        KEYS[5] prios zset       KEYS[6] delayed zset
-- KEYS[7] stats hash      KEYS[8] notify list      KEYS[9] wake list
-- KEYS[10] unique key (string; only read/written when ARGV[7] is not empty)
-- ARGV[1] entry name
-- ARGV[2] tick in ms since the epoch: the entry's score the caller read (schedule_due.lua)
-- ARGV[3] the entry's next tick in ms (> ARGV[2]), or -1 when it has none (it is removed)
-- ARGV[4] job id          ARGV[5] priority (integer -100..100)
-- ARGV[6] group ('' = the default group)
-- ARGV[7] unique key ('' = none)   ARGV[8] unique TTL in seconds (0 = until terminal)
-- ARGV[9..] field, value pairs copied into the job hash ('n', 'p', 'max', 'tmo', 'ttl')
--
-- The claim holds only while the entry's score is still ARGV[2]: of any number of
-- pollers that read the same due tick, exactly one moves the score on and enqueues;
-- the others get {'taken'}. Claim and enqueue are one script, so a poller killed at
-- any point either did both or neither (the tick is then still due for the others).
-- The job's run-at ('due') is the tick; it is queued at once (the tick has come).
-- Returns {'taken'} (claimed by another poller, or the entry is gone), {'paused'}
-- (the entry is paused: the tick is passed over, nothing enqueued), or the reply
-- of include/enqueue_job.lua {outcome, job id, state}; the entry's 'last' becomes
-- the tick and its 'job' the job id (the holder's for a 'duplicate').
-- Writes: schedule zset, the state hash; the job as enqueue.lua does.
-- A state hash that is not a hash (corrupt: include/record_problem.lua) is deleted
-- before anything is written, and the entry counts as not paused; its spec is set
-- again by the next schedule_sync.lua.

--@include enqueue_job.lua

local schedule, state = KEYS[2], KEYS[3]
local entry, tick, next_tick = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local prio, unique_ttl = tonumber(ARGV[5]), tonumber(ARGV[8])
if not tick or not next_tick or (next_tick >= 0 and next_tick <= tick) then
  return redis.error_reply('ERR rqueue schedule_claim: bad tick/next tick')
end
if not prio or prio ~= math.floor(prio) or prio < -100 or prio > 100 then
  return redis.error_reply('ERR rqueue schedule_claim: bad priority ' .. tostring(ARGV[5]))
end
if not unique_ttl or unique_ttl < 0 or (#ARGV - 8) % 2 ~= 0 then
  return redis.error_reply('ERR rqueue schedule_claim: bad unique TTL or fields')
end
local score = redis.call('ZSCORE', schedule, entry)
if not score or tonumber(score) ~= tick then
  return {'taken'}
end
local paused = redis.pcall('HGET', state, 'paused')
if type(paused) == 'table' then
  redis.call('DEL', state)
end
if next_tick >= 0 then
  redis.call('ZADD', schedule, next_tick, entry)
else
  redis.call('ZREM', schedule, entry)
end
if paused == '1' then
  return {'paused'}
end
local reply = enqueue_job(KEYS[1], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
                          KEYS[10], ARGV[4], tostring(prio), ARGV[6], 0, tick, ARGV[7],
                          unique_ttl, ARGV, 9, #ARGV)
redis.call('HSET', state, 'last', ARGV[2], 'job', reply[2])
return reply
