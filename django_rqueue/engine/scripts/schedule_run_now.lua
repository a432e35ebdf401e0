-- schedule_run_now: enqueue a periodic entry's job now, outside its ticks ("run now").
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives group:<prio>:<group>, ring:<prio>,
--         job:<holder id> for the unique check)
-- KEYS[2] the entry's state hash
-- KEYS[3] job hash        KEYS[4] prios zset       KEYS[5] delayed zset
-- KEYS[6] stats hash      KEYS[7] notify list      KEYS[8] wake list
-- KEYS[9] unique key (string; only read/written when ARGV[4] is not empty)
-- ARGV[1] job id          ARGV[2] priority (integer -100..100)
-- ARGV[3] group ('' = the default group)
-- ARGV[4] unique key ('' = none)   ARGV[5] unique TTL in seconds (0 = until terminal)
-- ARGV[6..] field, value pairs copied into the job hash ('n', 'p', 'max', 'tmo', 'ttl')
--
-- Runs even while the entry is paused; its next tick is left as it is. The entry's
-- 'last' becomes the Redis time and its 'job' the job id (the holder's for a 'duplicate').
-- A state hash that is not a hash (corrupt) is deleted first.
-- Returns the reply of include/enqueue_job.lua {outcome, job id, state}.

--@include enqueue_job.lua
--@include now_ms.lua

local prio, unique_ttl = tonumber(ARGV[2]), tonumber(ARGV[5])
if not prio or prio ~= math.floor(prio) or prio < -100 or prio > 100 then
  return redis.error_reply('ERR rqueue schedule_run_now: bad priority ' .. tostring(ARGV[2]))
end
if not unique_ttl or unique_ttl < 0 or (#ARGV - 5) % 2 ~= 0 then
  return redis.error_reply('ERR rqueue schedule_run_now: bad unique TTL or fields')
end
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', KEYS[2])
end
local reply = enqueue_job(KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                          KEYS[9], ARGV[1], tostring(prio), ARGV[3], 0, -1, ARGV[4],
                          unique_ttl, ARGV, 6, #ARGV)
redis.call('HSET', KEYS[2], 'last', now_ms(), 'job', reply[2])
return reply
