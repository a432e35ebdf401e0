-- check_token(jkey, token): nil when `jkey` is running under `token`, else a
-- reply {'stale', state, current token} that the caller returns unchanged; a record
-- that is not a hash gives {'stale', 'corrupt', what is wrong} (include/record_problem.lua)
-- instead of an error, before the caller wrote anything.
--@include record_problem.lua
--@include token_mismatch.lua
local function check_token(jkey, token)
  local cur = redis.pcall('HMGET', jkey, 's', 'token')
  if cur.err then
    return {'stale', CORRUPT_STATE, record_problem(jkey) or cur.err}
  end
  return token_mismatch(cur[1], cur[2], token)
end
