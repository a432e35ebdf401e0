-- save_metadata: replace a running job's metadata, fenced by its token.
--
-- KEYS[1] job hash
-- ARGV[1] fencing token   ARGV[2] metadata (a JSON object, maybe encrypted)
--
-- Returns {'ok'} or {'stale', state, current token} (nothing changed).

--@include check_token.lua

local jkey = KEYS[1]
local stale = check_token(jkey, ARGV[1])
if stale then
  return stale
end
redis.call('HSET', jkey, 'metadata', ARGV[2])
return {'ok'}
