--@include read_record.lua

-- read_in_state(jkey, want, field...) -> the HMGET reply of the job hash at `jkey` (the
-- state first, then `field...`) when its state is `want`; otherwise nil and the reply a
-- transition refused for its state returns: {'state', <state>}, the state being
-- CORRUPT_STATE when the record cannot be read and '' when there is none.
local function read_in_state(jkey, want, ...)
  local job, problem = read_record(jkey, 's', ...)
  if job[1] == want then
    return job, nil
  end
  if not job[1] then
    local st = problem and CORRUPT_STATE or ''
    return nil, {'state', st}
  end
  return nil, {'state', job[1]}
end
