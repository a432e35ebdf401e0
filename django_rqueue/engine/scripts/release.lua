-- release: hand a running job back to its queue WITHOUT spending an attempt
-- (graceful shutdown, restart). Fenced by the reservation's token.
--
-- KEYS[1] queue base (derives group:<prio>:<group>, ring:<prio>, grouprun, groupfull,
--         parked:<group>)   KEYS[2] job hash
-- KEYS[3] reserved zset   KEYS[4] prios zset   KEYS[5] stats hash   KEYS[6] notify list
-- ARGV[1] job id   ARGV[2] fencing token
--
-- attempts - 1 (the attempt never finished), token + 1 (any report from the
-- released holder is now stale), state queued at the tail of its group; its
-- group slot is given back first (include/group_slot_free.lua).
-- Attempts that are not a whole number become 0.
-- Returns {'ok'} or {'stale', state, current token} (nothing changed; state 'corrupt'
-- when the record is not a hash).

--@include check_token.lua
--@include group_slot_free.lua
--@include push_queued.lua
--@include whole.lua

local base, jkey, reserved, prios, stats, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]
local stale = check_token(jkey, ARGV[2])
if stale then
  return stale
end
local job = redis.call('HMGET', jkey, 'prio', 'group', 'attempts')
redis.call('ZREM', reserved, id)
group_slot_free(base, jkey)
-- The token matched ARGV[2] (a whole number from Python).
redis.call('HSET', jkey, 's', 'queued', 'attempts', math.max(0, whole(job[3], 1) - 1),
           'token', tonumber(ARGV[2]) + 1)
redis.call('HDEL', jkey, 'worker')
push_queued(base, prios, stats, notify, id, job[1], job[2])
return {'ok'}
