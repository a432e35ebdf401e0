-- check_token(jkey, token): nil when `jkey` is running under `token`, else a
-- reply {'stale', state, current token} that the caller returns unchanged.
local function check_token(jkey, token)
  local cur = redis.call('HMGET', jkey, 's', 'token')
  if cur[1] ~= 'running' or cur[2] ~= token then
    return {'stale', cur[1] or '', cur[2] or ''}
  end
  return nil
end
