-- promote: move due scheduled jobs (run-at <= now) into their group queues.
--
-- KEYS[1] queue base (derives job:<id>, group:<prio>:<group>, ring:<prio>, outbox,
--         waiting, and for an expired job unique:<key>, done:<id> and, with dependents,
--         those of include/dep_notify.lua)
-- KEYS[2] delayed zset   KEYS[3] prios zset   KEYS[4] stats hash
-- KEYS[5] notify list    KEYS[6] wake list
-- ARGV[1] batch limit (> 0): at most this many jobs per call
--
-- A due job whose expiry has come is ended instead of queued (include/expire_if_due.lua).
-- A due job whose record is not a hash or has no state goes to the failed store
-- (include/fail_corrupt.lua); an id without a record is dropped. The other due jobs go on.
-- Clears `wake` (the caller is awake and is about to sleep on the reply).
-- Returns {promoted count, ms until the next due job or -1 when none; 0 when
-- the batch was full and more may be due, entries in the queue's outbox stream (XLEN:
-- outcomes for dependents on other queues, for the relay), ms until the earliest
-- dependency deadline in `waiting` (0 when one has passed; -1 when no job waits, or
-- none has a deadline)}; an outbox or `waiting` that is not a stream or a zset reads as
-- empty. Safe to run from any number of
-- pollers at once: each due id is removed from `delayed` exactly once.

--@include expire_if_due.lua
--@include fail_corrupt.lua
--@include now_ms.lua
--@include push_queued.lua
--@include read_record.lua

local base, delayed, prios, stats, notify, wake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local limit = tonumber(ARGV[1])
if not limit or limit <= 0 then
  return redis.error_reply('ERR rqueue promote: bad limit ' .. tostring(ARGV[1]))
end
local now = now_ms()
local due = redis.call('ZRANGE', delayed, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
local promoted = 0
for _, id in ipairs(due) do
  redis.call('ZREM', delayed, id)
  local jkey = base .. 'job:' .. id
  local job, problem = read_record(jkey, 's', 'prio', 'group')
  if problem then
    fail_corrupt(base, jkey, stats, id, now, problem)
  elseif job[1] == 'scheduled' and not expire_if_due(base, jkey, stats, id, now) then
    redis.call('HSET', jkey, 's', 'queued')
    push_queued(base, prios, stats, notify, id, job[2], job[3])
    promoted = promoted + 1
  end
end
redis.call('DEL', wake)
-- What else the poller's round has to do, in this call rather than another round trip
-- (a corrupt outbox or waiting key reads as empty: promotion never fails on them).
local outbox = redis.pcall('XLEN', base .. 'outbox')
if type(outbox) ~= 'number' then
  outbox = 0
end
local first = redis.pcall('ZRANGE', base .. 'waiting', 0, 0, 'WITHSCORES')
local deadline = not first.err and tonumber(first[2] or '')
if not deadline or deadline == math.huge then
  deadline = -1
else
  deadline = math.max(0, deadline - now)
end
if #due == limit then
  return {promoted, 0, outbox, deadline}
end
local head = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
if head[2] == nil then
  return {promoted, -1, outbox, deadline}
end
return {promoted, math.max(0, tonumber(head[2]) - now), outbox, deadline}
