-- rate_spend(key, interval, tolerance, tat, n, now): record that a rate-limited queue
-- handed out `n` (>= 1) jobs at `now`, from the `tat` include/rate_allowance.lua returned:
-- TAT moves on by n * `interval`. Returns the ms until the next job may go (> 0 once the
-- allowance is used up). The key expires when TAT passes, so an idle queue leaves
-- nothing behind (a missing key reads as TAT <= now, which is the same state).
local function rate_spend(key, interval, tolerance, tat, n, now)
  local next_tat = tat + n * interval
  redis.call('SET', key, string.format('%.3f', next_tat), 'PX', math.ceil(next_tat - now))
  return math.ceil(next_tat - tolerance - now)
end
