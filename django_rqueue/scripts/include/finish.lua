-- release_unique(base, jkey, id): drop the job's unique key if this job still holds it.
-- Derived key: base .. 'unique:' .. <unique_key field>
local function release_unique(base, jkey, id)
  local uk = redis.call('HGET', jkey, 'unique_key')
  if uk then
    local ukey = base .. 'unique:' .. uk
    if redis.call('GET', ukey) == id then
      redis.call('DEL', ukey)
    end
  end
end

-- record_error(jkey, err): store `err` (opaque JSON made by Python) as the
-- job's current error and append it to its history err:1, err:2, ...
local function record_error(jkey, err)
  local n = redis.call('HINCRBY', jkey, 'nerr', 1)
  redis.call('HSET', jkey, 'error', err, 'err:' .. n, err)
end

-- move_to_failed(base, jkey, failed, stats, id, now): final failure.
local function move_to_failed(base, jkey, failed, stats, id, now)
  redis.call('HSET', jkey, 'state', 'failed', 'finished_at', now)
  redis.call('HDEL', jkey, 'worker')
  redis.call('ZADD', failed, now, id)
  redis.call('HINCRBY', stats, 'failed', 1)
  release_unique(base, jkey, id)
end

-- check_token(jkey, token): nil when `jkey` is running under `token`, else a
-- reply {'stale', state, current token} that the caller returns unchanged.
local function check_token(jkey, token)
  local cur = redis.call('HMGET', jkey, 'state', 'token')
  if cur[1] ~= 'running' or cur[2] ~= token then
    return {'stale', cur[1] or '', cur[2] or ''}
  end
  return nil
end
