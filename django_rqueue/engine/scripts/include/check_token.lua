-- check_token(jkey, token): nil when `jkey` is running under `token`, else a
-- reply {'stale', state, current token} that the caller returns unchanged.
--@include token_mismatch.lua
local function check_token(jkey, token)
  local cur = redis.call('HMGET', jkey, 's', 'token')
  return token_mismatch(cur[1], cur[2], token)
end
