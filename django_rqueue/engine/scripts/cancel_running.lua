-- cancel_running: end a running job as cancelled: its worker stopped it at the
-- request of cancel.lua ('cx' set). Fenced by the reservation's token.
--
-- KEYS[1] queue base (derives grouprun, groupfull, parked:<group>, unique:<key>, done:<id>,
--         and for a job with dependents those of include/dep_notify.lua)
-- KEYS[2] job hash   KEYS[3] reserved zset   KEYS[4] stats hash
-- ARGV[1] job id   ARGV[2] fencing token   ARGV[3] seconds to keep the record (0: delete it)
--
-- state cancelled, finished_at now, out of `reserved`, its group slot given back
-- (include/group_slot_free.lua), its unique key released, its waiters woken; not
-- retried whatever attempts remain. Counted in stats 'cancelled'. A stop that
-- Workflow.cancel() asked for ('cxw' set with 'cx', wf_cancel.lua) records
-- 'cancel_reason' 'workflow_cancelled'. A job with dependents ('nx') tells them it was
-- cancelled, with that reason (include/dep_notify.lua), before its record may be deleted.
-- Returns {'ok'} or {'stale', state, current token} (nothing changed).

--@include add_count.lua
--@include check_token_with.lua
--@include dep_notify.lua
--@include group_slot_free.lua
--@include now_ms.lua
--@include release_unique.lua
--@include wake_waiters.lua

local base, jkey, reserved, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, ttl = ARGV[1], tonumber(ARGV[3])
if not ttl or ttl < 0 then
  return redis.error_reply('ERR rqueue cancel_running: bad TTL ' .. tostring(ARGV[3]))
end
local job, stale = check_token_with(jkey, ARGV[2], 'nx', 'n', 'cxw')
if stale then
  return stale
end
local now = now_ms()
redis.call('ZREM', reserved, id)
group_slot_free(base, jkey)
local reason = ''
if job[5] then
  reason = 'workflow_cancelled'
  redis.call('HSET', jkey, 's', 'cancelled', 'finished_at', now, 'cancel_reason', reason)
else
  redis.call('HSET', jkey, 's', 'cancelled', 'finished_at', now)
end
add_count(stats, 'cancelled', 1)
release_unique(base, jkey, id)
wake_waiters(base, jkey, id)
if job[3] then
  dep_notify(base, {{id, job[3], 'c', ARGV[2], reason, job[4], ''}}, now)
end
if ttl > 0 then
  redis.call('EXPIRE', jkey, ttl)
else
  redis.call('DEL', jkey)
end
return {'ok'}
