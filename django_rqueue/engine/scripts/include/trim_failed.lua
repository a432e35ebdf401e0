-- trim_failed(base, failed, stats, now, ttl, cap, limit) -> deleted, taken: the failed
-- store's retention (a queue's failed_ttl and failed_max). Deletes the oldest failed
-- jobs (lowest failed-at first; jobs that failed in the same ms in id order) while the
-- store holds more than `cap` jobs or its oldest failed at or before now - `ttl` ms
-- (-1 for either: no such limit), at most `limit` per call, so that one call never
-- holds Redis for long on a huge backlog (the next failure, or the poller's next
-- round, takes the rest).
-- A deleted job's record goes (its error history err:1.. is in the same hash) with
-- its Job.wait wake-up list; ids of `failed` whose record is not in state failed
-- (stale: gone, or moved on) are dropped from `failed` too, without deleting
-- anything else. A record that is not a hash (include/record_problem.lua) is deleted
-- as a failed one is. The deleted jobs are counted in `stats` field 'trimmed'.
-- Returns the number of records deleted and the number of ids taken off `failed`
-- (`limit` when more may be due).
-- Derived keys: base .. 'job:' .. id, base .. 'done:' .. id.
--@include add_count.lua
local function trim_failed(base, failed, stats, now, ttl, cap, limit)
  local n = 0
  if cap >= 0 then
    n = redis.call('ZCARD', failed) - cap
  end
  if ttl >= 0 then
    n = math.max(n, redis.call('ZCOUNT', failed, '-inf', now - ttl))
  end
  n = math.min(n, limit)
  if n <= 0 then
    return 0, 0
  end
  local deleted = 0
  for _, id in ipairs(redis.call('ZRANGE', failed, 0, n - 1)) do
    local jkey = base .. 'job:' .. id
    local state = redis.pcall('HGET', jkey, 's')
    if state == 'failed' or type(state) == 'table' then
      redis.call('DEL', jkey, base .. 'done:' .. id)
      deleted = deleted + 1
    end
  end
  redis.call('ZREMRANGEBYRANK', failed, 0, n - 1)
  if deleted > 0 then
    add_count(stats, 'trimmed', deleted)
  end
  return deleted, n
end
