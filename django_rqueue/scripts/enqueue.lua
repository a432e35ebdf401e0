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
-- ARGV[8..] field, value pairs copied into the job hash (name, payload, options)
--
-- Returns {outcome, job id, state}: outcome 'created'; 'duplicate' (the unique
-- key is held by a pending job, whose id is returned); 'exists' (this id was
-- already enqueued: a retried call is a no-op).
-- Writes: job hash; a group list + ring + prios + notify, or delayed + wake; unique key.

--@include now.lua
--@include push_queued.lua
--@include delayed.lua

local base, jkey, prios, delayed, stats, notify, wake, ukey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local id, prio, group = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local delay, run_at = tonumber(ARGV[4]), tonumber(ARGV[5])
local unique, unique_ttl = ARGV[6], tonumber(ARGV[7])

if not prio or prio ~= math.floor(prio) or prio < -100 or prio > 100 then
  return redis.error_reply('ERR rqueue enqueue: bad priority ' .. tostring(ARGV[2]))
end
if not delay or delay < 0 or not run_at or not unique_ttl or unique_ttl < 0 then
  return redis.error_reply('ERR rqueue enqueue: bad delay/run_at/unique_ttl')
end
if (#ARGV - 7) % 2 ~= 0 then
  return redis.error_reply('ERR rqueue enqueue: odd number of field arguments')
end

local existing = redis.call('HGET', jkey, 'state')
if existing then
  return {'exists', id, existing}
end
if unique ~= '' then
  local holder = redis.call('GET', ukey)
  if holder then
    local st = redis.call('HGET', base .. 'job:' .. holder, 'state')
    if st == 'scheduled' or st == 'queued' or st == 'running' then
      return {'duplicate', holder, st}
    end
  end
end

local now = now_ms()
local due = now + delay
if run_at >= 0 then
  due = run_at
end
local state = 'queued'
if due > now then
  state = 'scheduled'
end
prio = tostring(prio)

local fields = {'state', state, 'prio', prio, 'group', group, 'attempts', 0, 'token', 0,
                'enqueued_at', now, 'run_at', due}
for i = 8, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
if unique ~= '' then
  fields[#fields + 1] = 'unique_key'
  fields[#fields + 1] = unique
  if unique_ttl > 0 then
    redis.call('SET', ukey, id, 'EX', unique_ttl)
  else
    redis.call('SET', ukey, id)
  end
end
redis.call('HSET', jkey, unpack(fields))

if state == 'scheduled' then
  add_delayed(delayed, wake, id, due)
else
  push_queued(base, prios, stats, notify, id, prio, group)
end
return {'created', id, state}
