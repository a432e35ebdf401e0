-- enqueue_batch: create many jobs of one @job call site (delay_many), which
-- share every option and differ in id, unique key and payload.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives group:<prio>:<group>, ring:<prio>,
--         job:<holder id> for the unique checks)
-- KEYS[2] prios zset   KEYS[3] delayed zset   KEYS[4] stats hash
-- KEYS[5] notify list  KEYS[6] wake list
-- KEYS[5+2i] job hash of item i   KEYS[6+2i] unique key of item i (i = 1..n)
-- ARGV[1] priority (integer -100..100)   ARGV[2] group ('' = the default group)
-- ARGV[3] delay in ms (>= 0), ignored when ARGV[4] >= 0
-- ARGV[4] run-at in ms since the epoch (absolute, UTC), or -1
-- ARGV[5] unique TTL in seconds (0 = until terminal)
-- ARGV[6] F, the number of shared field, value pairs that follow
-- ARGV[7..6+2F] shared field, value pairs copied into every job hash (name, options)
-- then per item i: job id, unique key ('' = none), payload (stored as field 'payload')
--
-- Each item is created exactly as enqueue.lua would (include/enqueue_job.lua),
-- in order. Returns a flat list {outcome, job id, state} x n.

--@include enqueue_job.lua

local prio, delay, run_at = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local unique_ttl, nshared = tonumber(ARGV[5]), tonumber(ARGV[6])
if not prio or prio ~= math.floor(prio) or prio < -100 or prio > 100 then
  return redis.error_reply('ERR rqueue enqueue_batch: bad priority ' .. tostring(ARGV[1]))
end
if not delay or delay < 0 or not run_at or not unique_ttl or unique_ttl < 0 then
  return redis.error_reply('ERR rqueue enqueue_batch: bad delay/run_at/unique_ttl')
end
if not nshared or nshared < 0 then
  return redis.error_reply('ERR rqueue enqueue_batch: bad shared field count')
end
local first_item = 7 + 2 * nshared
local n = (#ARGV - first_item + 1) / 3
if n ~= math.floor(n) or n < 0 or #KEYS ~= 6 + 2 * n then
  return redis.error_reply('ERR rqueue enqueue_batch: items and keys do not match')
end

local fields = {}
for i = 7, first_item - 1 do
  fields[#fields + 1] = ARGV[i]
end
local last = #fields + 2
prio = tostring(prio)
local reply = {}
for i = 1, n do
  local a = first_item + 3 * (i - 1)
  fields[last - 1], fields[last] = 'payload', ARGV[a + 2]
  local r = enqueue_job(KEYS[1], KEYS[5 + 2 * i], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6],
                        KEYS[6 + 2 * i], ARGV[a], prio, ARGV[2], delay, run_at, ARGV[a + 1],
                        unique_ttl, fields, 1, last)
  reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = r[1], r[2], r[3]
end
return reply
