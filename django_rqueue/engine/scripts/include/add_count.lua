-- add_count(stats, field, n): add `n` to the counter `field` of the queue's stats hash
-- (HINCRBY), never failing the script half-way on corrupt data: a field that is not an
-- integer (a foreign write) restarts at max(n, 0), and a stats key of another type is
-- replaced by a new hash. The counters only feed rqueue_info, the admin and /metrics;
-- a wrong one must not strand the group list and ring the caller already changed.
-- Costs nothing more than the HINCRBY when the field is sound.
local function add_count(stats, field, n)
  if type(redis.pcall('HINCRBY', stats, field, n)) == 'number' then
    return
  end
  if redis.call('TYPE', stats)['ok'] ~= 'hash' then
    redis.call('DEL', stats)
  end
  redis.call('HSET', stats, field, math.max(n, 0))
end
