-- dep_link: link a new dependent to an input that already exists (using(depends_on=...)),
-- in the input's slot.
--
-- KEYS[1] the input's queue base (derives next:<input id>, and when the dependent is on
--         this queue and the input has ended, job:<dependent id>, waiting and those of
--         include/dep_settle.lua and include/dep_notify.lua)
-- KEYS[2] the input's job hash
-- ARGV[1] the input's job id   ARGV[2] the edge entry '<copy><path><k>:<dependent id>'
--         (django_rqueue.dependencies)   ARGV[3] '1': the dependent is on this queue
--         (settle it now when the input has ended), '0': it is not
--
-- One HMGET of the input. Not ended (waiting, scheduled, queued, running): the entry is
-- appended to base .. 'next:' .. <input id> and the input's 'nx' gets the token '+' (once),
-- so its terminal transition delivers to it (include/dep_notify.lua) -> {'linked'}. Ended
-- (succeeded, failed, cancelled): its arrival value is built from its record (the result,
-- the last error, the cancel reason; include/outcome.lua) and, with ARGV[3] '1', recorded on
-- the dependent at once (include/dep_settle.lua, and the cascade of a dependent it ends)
-- -> {'settled'}; with '0' -> {'ended', value}: the caller applies it with dep_apply.lua
-- on the dependent's queue. No record (gone: its result TTL ran out, or never was; or a
-- record that is not a job hash) -> {'missing'}: nothing written. Linking the same edge
-- twice delivers twice, and the dependent records the second as a duplicate.

--@include dep_notify.lua
--@include dep_settle.lua
--@include now_ms.lua
--@include outcome.lua

local base, jkey = KEYS[1], KEYS[2]
local id, entry, here = ARGV[1], ARGV[2], ARGV[3]
local copy, k, did = string.match(entry or '', '^([pc])[io](%d+):(.+)$')
if not did or (here ~= '0' and here ~= '1') then
  return redis.error_reply('ERR rqueue dep_link: bad edge entry or flag')
end
local job = redis.pcall('HMGET', jkey, 's', 'nx', 'n', 'token', 'result', 'error',
                        'cancel_reason')
if job.err or not job[1] then
  return {'missing'}
end
local st = job[1]
if st == 'waiting' or st == 'scheduled' or st == 'queued' or st == 'running' then
  redis.call('RPUSH', base .. 'next:' .. id, entry)
  local nx = job[2]
  if not nx then
    redis.call('HSET', jkey, 'nx', '+')
  elseif not string.find(' ' .. nx .. ' ', ' + ', 1, true) then
    redis.call('HSET', jkey, 'nx', nx .. ' +')
  end
  return {'linked'}
end
local kind, body, reason = 'c', '', job[7] or ''
if st == 'succeeded' then
  kind, body = 's', job[5] or ''
elseif st == 'failed' then
  kind, body = 'f', job[6] or ''
elseif st ~= 'cancelled' then
  return {'missing'}
end
if copy ~= 'p' then
  body = ''
end
local value = outcome(kind, job[4], reason, job[3], body)
if here == '0' then
  return {'ended', value}
end
local now = now_ms()
local _, ended = dep_settle(base, did, k, value, now)
if ended and ended[2] then
  dep_notify(base, {ended}, now)
end
return {'settled'}
