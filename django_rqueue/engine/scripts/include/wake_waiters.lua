-- wake_waiters(base, jkey, id): call on a terminal transition (success, final
-- failure, cancel, delete) before the record may be deleted. When a waiter
-- marked the job as awaited (field 'w', set by Job.wait), push a token to
-- the job's wake-up list base .. 'done:' .. id, which Job.wait BLPOPs; the
-- list expires after 60 s so no token lingers. A job nobody awaits costs
-- one HEXISTS.
-- Derived key: base .. 'done:' .. id.
local function wake_waiters(base, jkey, id)
  if redis.call('HEXISTS', jkey, 'w') == 1 then
    local done = base .. 'done:' .. id
    redis.call('RPUSH', done, '1')
    redis.call('EXPIRE', done, 60)
  end
end
