-- release_unique(base, jkey, id): drop the job's unique key if this job still holds it.
-- Derived key: base .. 'unique:' .. <'uk' field>
local function release_unique(base, jkey, id)
  local uk = redis.call('HGET', jkey, 'uk')
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

-- count_finished(base, kind, now): add one to this minute's count of
-- succeeded (kind 's') or finally failed (kind 'f') jobs, for the admin chart.
-- Derived key: base .. 'throughput', a hash used as a ring of 60 minute slots:
-- m<slot> = the minute (ms // 60000) the slot holds, s<slot> and f<slot> its
-- counts, slot = minute % 60; a slot is reset when a new minute reaches it,
-- so the hash never holds more than 180 fields.
local function count_finished(base, kind, now)
  local key = base .. 'throughput'
  local minute = math.floor(now / 60000)
  local slot = minute % 60
  if tonumber(redis.call('HGET', key, 'm' .. slot)) ~= minute then
    redis.call('HSET', key, 'm' .. slot, minute, 's' .. slot, 0, 'f' .. slot, 0)
  end
  redis.call('HINCRBY', key, kind .. slot, 1)
end

-- move_to_failed(base, jkey, failed, stats, id, now): final failure.
-- Derived key: base .. 'throughput' (see count_finished).
local function move_to_failed(base, jkey, failed, stats, id, now)
  redis.call('HSET', jkey, 's', 'failed', 'finished_at', now)
  redis.call('HDEL', jkey, 'worker')
  redis.call('ZADD', failed, now, id)
  redis.call('HINCRBY', stats, 'failed', 1)
  count_finished(base, 'f', now)
  release_unique(base, jkey, id)
end

-- check_token(jkey, token): nil when `jkey` is running under `token`, else a
-- reply {'stale', state, current token} that the caller returns unchanged.
local function check_token(jkey, token)
  local cur = redis.call('HMGET', jkey, 's', 'token')
  if cur[1] ~= 'running' or cur[2] ~= token then
    return {'stale', cur[1] or '', cur[2] or ''}
  end
  return nil
end
