-- add_delayed_many(delayed, wake, ids, run_at): schedule the jobs `ids` (a Lua
-- array), all due at `run_at` (ms), with one ZADD per 1000 jobs and, when they
-- become the earliest due jobs, leave a token on `wake` so a sleeping poller
-- wakes early (at most 16 tokens).
local DELAYED_CHUNK, WAKE_TOKENS = 1000, 16
local function add_delayed_many(delayed, wake, ids, run_at)
  local n = #ids
  if n == 0 then
    return
  end
  local head = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  for i = 1, n, DELAYED_CHUNK do
    local members = {}
    for j = i, math.min(i + DELAYED_CHUNK - 1, n) do
      members[#members + 1], members[#members + 2] = run_at, ids[j]
    end
    redis.call('ZADD', delayed, unpack(members))
  end
  if (head[2] == nil or run_at < tonumber(head[2])) and redis.call('LLEN', wake) < WAKE_TOKENS then
    redis.call('RPUSH', wake, '1')
  end
end
