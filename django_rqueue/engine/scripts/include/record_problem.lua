-- Job records that cannot be read as job records: a key of another type where the job
-- hash should be (a string, list, set ... left by a foreign write), or a hash without a
-- state (field 's'). Every script that reads a record reads it with redis.pcall (a
-- command on a key of the wrong type raises WRONGTYPE, and Redis keeps the writes a
-- script made before it failed), so that it can end such a job (include/fail_corrupt.lua)
-- or refuse before writing anything; a record read without error costs nothing more.
--
-- record_problem(jkey) -> what is wrong with the record at `jkey`, in words ('it is a
-- string, not a hash'), or nil when it is a hash with a state or does not exist. One
-- TYPE (and one HEXISTS for a hash): call it only once a read failed or found no state.
-- CORRUPT_STATE ('corrupt'; django_rqueue.engine.replies.CORRUPT_STATE) is the state a
-- script reports to its caller for such a record, in a {'stale', state, problem} or
-- {'state', state} reply.
local CORRUPT_STATE = 'corrupt'
local function record_problem(jkey)
  local kind = redis.call('TYPE', jkey)['ok']
  if kind == 'none' then
    return nil
  end
  if kind ~= 'hash' then
    return 'it is a ' .. kind .. ', not a hash'
  end
  if redis.call('HEXISTS', jkey, 's') == 0 then
    return 'it has no state (field "s")'
  end
  return nil
end
