--@include record_problem.lua

-- read_record(jkey, 's', field...) -> the HMGET reply of the job hash at `jkey` (the
-- state first), and what is wrong with the record (record_problem) or nil. The reply of
-- a record that cannot be read has no state, so a caller that only checks the state
-- skips it; one that must end it checks the problem.
local function read_record(jkey, ...)
  local job = redis.pcall('HMGET', jkey, ...)
  if job.err or not job[1] then
    return job, record_problem(jkey)
  end
  return job, nil
end
