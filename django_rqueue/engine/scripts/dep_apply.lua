-- dep_apply: record arrivals on waiting jobs of one queue: the relay applying the outbox
-- entries of other queues, the opening of gates ('g0:' at input 0), a parent that had
-- already ended when a dependent was linked to it (dep_link.lua's 'ended').
--
-- KEYS[1] the dependents' queue base (derives job:<id>, waiting, stats, and for a job
--         released or ended here delayed, wake, prios, notify, group:<prio>:<group>,
--         ring:<prio>, parked:<group>, groupfull, paused, unique:<key>, done:<id>, and
--         for the cascade next:<id>, outbox, wf:<workflow id>)
-- ARGV triples: dependent job id, input index (digits; 0 the gate), arrival value
--         (django_rqueue.dependencies; include/outcome.lua)
--
-- Each triple goes through include/dep_settle.lua: recorded once on a waiting job, a
-- duplicate otherwise (the input arrived already, an outcome older than a re-arm, a job
-- that is not waiting or is gone: nothing written, no key created), so applying the same
-- triples again changes nothing. The jobs whose last input this was are released or
-- ended (include/node_decide.lua); those that ended notify their own dependents in turn
-- (include/dep_notify.lua, bounded; the rest through this queue's outbox).
-- Returns {applied, duplicates, released, ended (cancelled or expired)}.

--@include dep_notify.lua
--@include dep_settle.lua
--@include now_ms.lua

local base = KEYS[1]
if #ARGV % 3 ~= 0 then
  return redis.error_reply('ERR rqueue dep_apply: arguments are not triples')
end
for i = 2, #ARGV, 3 do
  if not string.match(ARGV[i], '^%d+$') then
    return redis.error_reply('ERR rqueue dep_apply: bad input index ' .. ARGV[i])
  end
end
local now = now_ms()
local applied, duplicates, released, ended = 0, 0, 0, {}
for i = 1, #ARGV, 3 do
  local status, item = dep_settle(base, ARGV[i], ARGV[i + 1], ARGV[i + 2], now)
  if status == 'missed' or status == 'duplicate' then
    duplicates = duplicates + 1
  else
    applied = applied + 1
    if status == 'released' then
      released = released + 1
    elseif status == 'ended' then
      ended[#ended + 1] = item
    end
  end
end
local cascade = {}
for _, item in ipairs(ended) do
  if item[2] then
    cascade[#cascade + 1] = item
  end
end
if #cascade > 0 then
  dep_notify(base, cascade, now)
end
return {applied, duplicates, released, #ended}
