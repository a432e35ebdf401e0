-- mark_awaited: mark a job as awaited by Job.wait and read it, in one step.
--
-- KEYS[1] job hash
-- (no ARGV)
--
-- Returns the job hash as a flat field/value list, with field 'w' set to 1
-- (include/wake_waiters.lua then wakes the waiter at the job's terminal
-- transition), or an empty list when the job does not exist (nothing written:
-- no hash is created for a job that is gone). A transition after this call
-- sees the mark; one before it is seen in the returned hash.

local jkey = KEYS[1]
if redis.call('EXISTS', jkey) == 0 then
  return {}
end
redis.call('HSET', jkey, 'w', '1')
return redis.call('HGETALL', jkey)
