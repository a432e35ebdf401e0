-- pause: stop a queue from handing out jobs (rqueue_pause); it still accepts them.
--
-- KEYS[1] paused flag "<base>paused" (string: Redis time in ms the pause began)
-- KEYS[2] notify list
-- (no ARGV)
--
-- Every reserve (reserve.lua, ack_reserve.lua, through include/reserve_batch.lua)
-- reads the flag, so every worker obeys from its next reservation on; jobs
-- already running finish and report as usual. Clears `notify`: the wake-up
-- tokens there announced jobs nobody may now take.
-- Returns 1 when the queue was running, 0 when it was already paused (the
-- first pause's time is kept).

--@include now_ms.lua

local paused, notify = KEYS[1], KEYS[2]
redis.call('DEL', notify)
if redis.call('SET', paused, now_ms(), 'NX') then
  return 1
end
return 0
