-- rate_allowance(key, interval, tolerance): how many jobs a rate-limited queue may hand
-- out now, by GCRA, the Generic Cell Rate Algorithm of ATM networks (ATM Forum, Traffic
-- Management 4.0, its "virtual scheduling" form; as in redis-cell and in Brandur Leach's
-- "Rate limiting, cells, and GCRA"). `key` holds the theoretical arrival time (TAT, ms on
-- the Redis clock) of the queue's next job: a job may go at `now` when
-- now >= TAT - `tolerance`, and each job handed out moves TAT on by `interval` (ms per
-- job), from `now` when TAT is already past. So jobs go `interval` apart whoever asks, a
-- worker up to `tolerance` ms late for its slot still gets it, and after an idle spell
-- floor(tolerance / interval) + 1 jobs may go at once.
-- Returns (allowed >= 0, tat, now): `tat` is max(TAT, now), the base from which
-- include/rate_spend.lua moves TAT on once the jobs are handed out.
-- A TAT further ahead than tolerance + interval (+ 1 ms of slack) cannot come from this
-- rate (jobs go only while TAT <= now + tolerance): the rate was raised, or the Redis
-- clock went back; it restarts from now.
--@include now_ms.lua
local function rate_allowance(key, interval, tolerance)
  local now = now_ms()
  local tat = tonumber(redis.call('GET', key) or '')
  if not tat or tat < now or tat > now + tolerance + interval + 1 then
    tat = now
  end
  -- A hair of slack: TAT moves in floating-point steps of `interval`.
  local allowed = math.floor((now + tolerance - tat) / interval + 1e-9) + 1
  if allowed < 0 then
    allowed = 0
  end
  return allowed, tat, now
end
