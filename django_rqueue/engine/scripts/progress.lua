-- progress: record a running job's progress, fenced by its token.
--
-- KEYS[1] job hash
-- ARGV[1] fencing token   ARGV[2] progress JSON ({"current", "total", "message"})
--
-- Returns {'ok', written at ms} or {'stale', state, current token} (nothing changed).

--@include check_token.lua
--@include now_ms.lua

local jkey = KEYS[1]
local stale = check_token(jkey, ARGV[1])
if stale then
  return stale
end
local now = now_ms()
redis.call('HSET', jkey, 'progress', ARGV[2], 'progress_at', now)
return {'ok', now}
