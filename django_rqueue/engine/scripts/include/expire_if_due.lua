-- expire_if_due(base, jkey, stats, id, now) -> true when the job's expiry has come,
-- false (nothing changed) when it has none ('exp' absent) or `now` is before it.
-- A job whose 'exp' (ms since the epoch, Redis clock) is at or before `now` is never
-- started: it ends as cancelled, with 'cancel_reason' 'expired' (include/expire_job.lua:
-- counted, unique key released, waiters woken); a job with dependents ('nx') tells them
-- (include/dep_notify.lua, kind 'c', reason 'expired'); then its record expires after its
-- result TTL ('ttl' s; 0 deletes it now), as a success's does. The caller has already
-- taken the job out of the structure it was in (its group list, `delayed`). One HMGET
-- reads the expiry and what the end needs.
-- Derived keys: base .. 'unique:' .. <'uk' field>, base .. 'done:' .. id, and those of
-- include/dep_notify.lua.
--@include expire_job.lua
--@include notify_dependents.lua
--@include stored_default.lua
local function expire_if_due(base, jkey, stats, id, now)
  local job = redis.call('HMGET', jkey, 'exp', 'ttl', 'nx', 'n', 'token')
  local expires = tonumber(job[1])
  if not expires or now < expires then
    return false
  end
  expire_job(base, jkey, stats, id, now)
  if job[3] then
    notify_dependents(base, {{id, job[3], 'c', job[5], 'expired', job[4], ''}}, now)
  end
  local ttl = tonumber(stored_default('ttl', job[2])) or 0
  if ttl > 0 then
    redis.call('EXPIRE', jkey, ttl)
  else
    redis.call('DEL', jkey)
  end
  return true
end
