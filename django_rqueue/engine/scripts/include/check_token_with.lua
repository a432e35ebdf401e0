-- check_token_with(jkey, token, field...) -> job, stale: include/check_token.lua's check
-- that `jkey` is running under `token`, in the same one HMGET as the fields its caller
-- needs next: `job` is the HMGET reply ({state, token, field...}) and `stale` nil when the
-- job is running under `token`; else `job` is nil and `stale` the reply {'stale', state,
-- current token} (or {'stale', 'corrupt', what is wrong} for a record that is not a hash:
-- include/record_problem.lua) that the caller returns unchanged, before it wrote anything.
--@include record_problem.lua
--@include token_mismatch.lua
local function check_token_with(jkey, token, ...)
  local cur = redis.pcall('HMGET', jkey, 's', 'token', ...)
  if cur.err then
    return nil, {'stale', CORRUPT_STATE, record_problem(jkey) or cur.err}
  end
  local stale = token_mismatch(cur[1], cur[2], token)
  if stale then
    return nil, stale
  end
  return cur, nil
end
