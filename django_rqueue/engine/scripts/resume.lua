-- resume: let a paused queue hand out jobs again (rqueue_resume).
--
-- KEYS[1] paused flag "<base>paused"   KEYS[2] stats hash   KEYS[3] notify list
-- (no ARGV)
--
-- Leaves one wake-up token per queued job (at most 64, as
-- include/push_queued_many.lua) on `notify`, which idle workers BLPOP, so the
-- queued jobs start within milliseconds.
-- Returns 1 when the queue was paused, 0 when it was not (nothing changed).

--@include push_tokens.lua

local paused, stats, notify = KEYS[1], KEYS[2], KEYS[3]
if redis.call('DEL', paused) == 0 then
  return 0
end
local queued = tonumber(redis.call('HGET', stats, 'queued') or '0')
push_tokens(notify, math.min(queued, NOTIFY_TOKENS) - redis.call('LLEN', notify))
return 1
