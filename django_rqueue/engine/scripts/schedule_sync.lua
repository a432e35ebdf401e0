-- schedule_sync: make the periodic entries of one queue in Redis match the settings.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives schedule:<entry>, each entry's state hash)
-- KEYS[2] schedule zset (entry -> next tick, ms since the epoch)
-- ARGV[1], ARGV[2], ARGV[3], ... triples: entry name, spec (what defines its ticks),
--         first tick in ms (the first tick after the Redis time the caller read; the
--         entry's next tick if it is new)
--
-- A new entry, or one whose spec changed (its stored next tick belongs to another
-- definition), gets its spec and that first tick; an entry already stored with the
-- same spec keeps its next tick, its last run and its pause. Entries of the zset
-- that are not listed (removed from the settings, or moved to another queue) are
-- removed with their state hash.
-- A schedule zset that is not a zset, or an entry's state that is not a hash (corrupt
-- data), is deleted first and set again as new.
-- Returns {entries (re)set, entries removed}. O(entries): run when a poller starts
-- or reconnects, never per poll.

local base, schedule = KEYS[1], KEYS[2]
if #ARGV % 3 ~= 0 then
  return redis.error_reply('ERR rqueue schedule_sync: arguments are not triples')
end
local kind = redis.call('TYPE', schedule)['ok']
if kind ~= 'zset' and kind ~= 'none' then
  redis.call('DEL', schedule)
end
local listed, set, removed = {}, 0, 0
for i = 1, #ARGV, 3 do
  local entry, spec, first = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if not first then
    return redis.error_reply('ERR rqueue schedule_sync: bad first tick ' .. tostring(ARGV[i + 2]))
  end
  listed[entry] = true
  local state = base .. 'schedule:' .. entry
  local stored = redis.pcall('HGET', state, 'spec')
  if type(stored) == 'table' then
    redis.call('DEL', state)
  end
  if stored ~= spec then
    redis.call('HSET', state, 'spec', spec)
    redis.call('ZADD', schedule, first, entry)
    set = set + 1
  elseif redis.call('ZADD', schedule, 'NX', first, entry) == 1 then
    set = set + 1
  end
end
for _, entry in ipairs(redis.call('ZRANGE', schedule, 0, -1)) do
  if not listed[entry] then
    redis.call('ZREM', schedule, entry)
    redis.call('DEL', base .. 'schedule:' .. entry)
    removed = removed + 1
  end
end
return {set, removed}
