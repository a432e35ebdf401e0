-- enqueue_batch: create many jobs of one @job call site (delay_many), which
-- share every option and differ in id, payload and unique key.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives job:<id> for each item,
--         unique:<key> for its unique key, group:<prio>:<group>, ring:<prio>,
--         job:<holder id> for the unique checks)
-- KEYS[2] prios zset   KEYS[3] delayed zset   KEYS[4] stats hash
-- KEYS[5] notify list  KEYS[6] wake list
-- ARGV[1] priority (integer -100..100)   ARGV[2] group ('' = the default group)
-- ARGV[3] delay in ms (>= 0), ignored when ARGV[4] >= 0
-- ARGV[4] run-at in ms since the epoch (absolute, UTC), or -1
-- ARGV[5] unique TTL in seconds (0 = until terminal)
-- ARGV[6] F, the number of shared field, value pairs that follow
-- ARGV[7..6+2F] shared field, value pairs copied into every job hash ('n', 'max', 'tmo', 'ttl')
-- ARGV[7+2F] U: 1 when every item carries a unique key, 0 when none does
-- then per item i: job id, payload (stored as field 'p'), and its unique
-- key ('' = none) when U is 1
--
-- Each item is created as enqueue.lua would create it (include/enqueue_job.lua),
-- in order, with one Redis TIME for the batch; the created jobs are then linked
-- with one command of each kind (push_queued_many / add_delayed_many), and
-- counted with one in the stats hash's 'enqueued' field.
-- Returns {state of the created jobs, then index, outcome, id, state for each
-- item that was not created} (index 1-based; outcome 'exists' or 'duplicate',
-- as enqueue.lua). An empty refusal list means every item was created.

--@include add_delayed_many.lua
--@include create_job.lua
--@include now_ms.lua
--@include push_queued_many.lua
--@include schedule.lua

local prio, delay, run_at = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local unique_ttl, nshared = tonumber(ARGV[5]), tonumber(ARGV[6])
if not prio or prio ~= math.floor(prio) or prio < -100 or prio > 100 then
  return redis.error_reply('ERR rqueue enqueue_batch: bad priority ' .. tostring(ARGV[1]))
end
if not delay or delay < 0 or not run_at or not unique_ttl or unique_ttl < 0 then
  return redis.error_reply('ERR rqueue enqueue_batch: bad delay/run_at/unique_ttl')
end
if not nshared or nshared < 0 or nshared ~= math.floor(nshared) then
  return redis.error_reply('ERR rqueue enqueue_batch: bad shared field count')
end
local with_unique = ARGV[7 + 2 * nshared]
if with_unique ~= '0' and with_unique ~= '1' then
  return redis.error_reply('ERR rqueue enqueue_batch: bad unique flag')
end
local width = 2
if with_unique == '1' then
  width = 3
end
local first_item = 8 + 2 * nshared
local n = (#ARGV - first_item + 1) / width
if n ~= math.floor(n) or n < 0 then
  return redis.error_reply('ERR rqueue enqueue_batch: items are not whole')
end

local base = KEYS[1]
local fields = {}
for i = 7, 6 + 2 * nshared do
  fields[#fields + 1] = ARGV[i]
end
local last = #fields + 2
fields[last - 1] = 'p'
prio = tostring(prio)
local now = now_ms()
local due, state = schedule(now, delay, run_at)
local created, reply = {}, {state}
for i = 1, n do
  local a = first_item + width * (i - 1)
  local id, unique = ARGV[a], ''
  if width == 3 then
    unique = ARGV[a + 2]
  end
  fields[last] = ARGV[a + 1]
  local refused = create_job(base, base .. 'job:' .. id, base .. 'unique:' .. unique, id, unique,
                             unique_ttl, now, due, state, prio, ARGV[2], fields, 1, last)
  if refused then
    reply[#reply + 1], reply[#reply + 2] = i, refused[1]
    reply[#reply + 1], reply[#reply + 2] = refused[2], refused[3]
  else
    created[#created + 1] = id
  end
end
if #created > 0 then
  redis.call('HINCRBY', KEYS[4], 'enqueued', #created)
end
if state == 'scheduled' then
  add_delayed_many(KEYS[3], KEYS[6], created, due)
else
  push_queued_many(base, KEYS[2], KEYS[4], KEYS[5], created, prio, ARGV[2])
end
return reply
