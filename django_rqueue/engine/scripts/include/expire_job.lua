-- expire_job(base, jkey, stats, id, now): end the job `id`, whose expiry ('exp') has come
-- before it started, as cancelled with 'cancel_reason' 'expired' and 'finished_at' `now`,
-- counted in `stats` field 'expired'; its unique key is released and its waiters are woken
-- (include/wake_waiters.lua). No failure: no error is recorded and the attempts are left
-- as they are. The state part only: the caller has taken the job out of the structure it
-- was in, and delivers the outcome to its dependents (include/dep_notify.lua) and applies
-- its result TTL itself (include/expire_if_due.lua, include/node_decide.lua).
-- Derived keys: base .. 'unique:' .. <'uk' field>, base .. 'done:' .. id.
--@include add_count.lua
--@include release_unique.lua
--@include wake_waiters.lua
local function expire_job(base, jkey, stats, id, now)
  redis.call('HSET', jkey, 's', 'cancelled', 'cancel_reason', 'expired', 'finished_at', now)
  add_count(stats, 'expired', 1)
  release_unique(base, jkey, id)
  wake_waiters(base, jkey, id)
end
