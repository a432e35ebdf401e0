-- expire_if_due(base, jkey, stats, id, now) -> true when the job's expiry has come,
-- false (nothing changed) when it has none ('exp' absent) or `now` is before it.
-- A job whose 'exp' (ms since the epoch, Redis clock) is at or before `now` is never
-- started: it ends as cancelled, with 'cancel_reason' 'expired' and 'finished_at'
-- now, counted in `stats` field 'expired'; its unique key is released, its waiters
-- are woken (include/wake_waiters.lua), and its record expires after its result TTL
-- ('ttl' s; 0 deletes it now), as a success's does. No failure: no error is
-- recorded and the attempts are left as they are. The caller has already taken
-- the job out of the structure it was in (its group list, `delayed`).
-- Derived keys: base .. 'unique:' .. <'uk' field>, base .. 'done:' .. id.
--@include add_count.lua
--@include release_unique.lua
--@include stored_default.lua
--@include wake_waiters.lua
local function expire_if_due(base, jkey, stats, id, now)
  local expires = tonumber(redis.call('HGET', jkey, 'exp'))
  if not expires or now < expires then
    return false
  end
  redis.call('HSET', jkey, 's', 'cancelled', 'cancel_reason', 'expired', 'finished_at', now)
  add_count(stats, 'expired', 1)
  release_unique(base, jkey, id)
  wake_waiters(base, jkey, id)
  local ttl = tonumber(stored_default('ttl', redis.call('HGET', jkey, 'ttl'))) or 0
  if ttl > 0 then
    redis.call('EXPIRE', jkey, ttl)
  else
    redis.call('DEL', jkey)
  end
  return true
end
