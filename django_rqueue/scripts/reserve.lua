-- reserve: hand the next job to a worker under a lease and a new fencing token.
--
-- Order: highest priority in `prios`; at that priority the group at the head of
-- its ring (then moved to the tail if it still has jobs: round-robin between
-- groups); that group's oldest job (FIFO). O(log P) for P priority levels.
--
-- KEYS[1] queue base "<prefix>:{<queue>}:" (derives ring:<prio>, group:<prio>:<group>, job:<id>)
-- KEYS[2] prios zset   KEYS[3] reserved zset   KEYS[4] stats hash   KEYS[5] notify list
-- ARGV[1] lease in ms (> 0)   ARGV[2] worker id (stored in the job for visibility)
--
-- Returns false when nothing is queued (and clears `notify`, so a token left
-- there afterwards always means "new work since you looked"); otherwise the
-- job's id followed by its whole hash as a flat field/value list, after:
-- state = running, attempts + 1, token + 1, started_at = now, lease deadline
-- = now + lease in `reserved`.

--@include now.lua

local base, prios, reserved, stats, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease = tonumber(ARGV[1])
if not lease or lease <= 0 then
  return redis.error_reply('ERR rqueue reserve: bad lease ' .. tostring(ARGV[1]))
end

-- Bounded: ids whose job hash vanished (deleted behind our back) are skipped.
for _ = 1, 100 do
  local top = redis.call('ZREVRANGE', prios, 0, 0)[1]
  if not top then
    redis.call('DEL', notify)
    return false
  end
  local ring = base .. 'ring:' .. top
  local group = redis.call('LPOP', ring)
  if not group then
    redis.call('ZREM', prios, top)
  else
    local gkey = base .. 'group:' .. top .. ':' .. group
    local id = redis.call('LPOP', gkey)
    if redis.call('LLEN', gkey) > 0 then
      redis.call('RPUSH', ring, group)
    elseif redis.call('LLEN', ring) == 0 then
      redis.call('ZREM', prios, top)
    end
    if id then
      redis.call('HINCRBY', stats, 'queued', -1)
      local jkey = base .. 'job:' .. id
      if redis.call('HGET', jkey, 'state') == 'queued' then
        local now = now_ms()
        redis.call('HINCRBY', jkey, 'token', 1)
        redis.call('HINCRBY', jkey, 'attempts', 1)
        redis.call('HSET', jkey, 'state', 'running', 'started_at', now, 'worker', ARGV[2])
        redis.call('ZADD', reserved, now + lease, id)
        local reply = redis.call('HGETALL', jkey)
        table.insert(reply, 1, id)
        return reply
      end
    end
  end
end
return false
