-- push_queued_many(base, prios, stats, notify, ids, prio, group): append the
-- jobs `ids` (a Lua array, in order) to their group's FIFO at priority `prio`,
-- with one command of each kind instead of one per job; add the group to the
-- tail of that priority's ring and the priority to `prios` when the group
-- list was empty (a group is in the ring exactly when its list is non-empty
-- and it is not parked there);
-- count them queued; leave wake-up tokens for idle workers (at most 64), none
-- while the queue is paused (its workers reserve nothing: a token would only
-- wake them for an empty reserve; resume.lua leaves the tokens instead).
-- A group at its "group_concurrency" cap (a member of base .. 'groupfull') is
-- parked at `prio` instead of joining the ring (include/park_group.lua), and its
-- jobs leave no token: none of them may start before one of its running jobs
-- ends, and that end leaves one (include/group_slot_free.lua).
-- Derived keys: base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio,
-- base .. 'paused', base .. 'groupfull', base .. 'parked:' .. group
-- `prio` and `group` may be false (HMGET of a field the job hash leaves out
-- at its default): priority '0', the default group ''. A `prio` that is not an integer
-- from -100 to 100 (a corrupt record re-queued by promote, reclaim, retry ...) is taken
-- as '0' too: ZADD would refuse it after the group list and ring were written.
--@include add_count.lua
--@include park_group.lua
--@include push_tokens.lua
local PUSH_CHUNK = 1000
local function push_queued_many(base, prios, stats, notify, ids, prio, group)
  local n = #ids
  if n == 0 then
    return
  end
  prio, group = prio or '0', group or ''
  local level = tonumber(prio)
  if not level or level ~= level or level % 1 ~= 0 or level < -100 or level > 100 then
    prio = '0'
  end
  local gkey = base .. 'group:' .. prio .. ':' .. group
  local length = 0
  for i = 1, n, PUSH_CHUNK do  -- unpack() is bounded by Lua's C stack
    length = redis.call('RPUSH', gkey, unpack(ids, i, math.min(i + PUSH_CHUNK - 1, n)))
  end
  local full = nil
  if length == n then
    full = redis.call('SISMEMBER', base .. 'groupfull', group) == 1
    if full then
      park_group(base, group, prio)
    elseif redis.call('RPUSH', base .. 'ring:' .. prio, group) == 1 then
      redis.call('ZADD', prios, prio, prio)
    end
  end
  add_count(stats, 'queued', n)
  -- The token list is read first: while it is full (no worker took a token: a backlog),
  -- no other read is needed (two commands fewer per enqueue then).
  local room = NOTIFY_TOKENS - redis.call('LLEN', notify)
  if room <= 0 then
    return
  end
  if full == nil then
    full = redis.call('SISMEMBER', base .. 'groupfull', group) == 1
  end
  if full or redis.call('EXISTS', base .. 'paused') == 1 then
    return
  end
  push_tokens(notify, math.min(n, room))
end
