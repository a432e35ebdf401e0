-- enqueue_job(base, jkey, prios, delayed, stats, notify, wake, ukey, id, prio,
--             group, delay, run_at, unique, unique_ttl, fields, first, last):
-- create job `id` (hash `jkey`), queued now or scheduled for later; optionally
-- unique. `prio` is a validated integer string, `delay` ms >= 0 (ignored when
-- `run_at` >= 0, ms since the epoch), `unique` '' for none, `unique_ttl`
-- seconds (0 = until terminal); fields[first..last] are field, value pairs
-- copied into the hash (name, payload, options).
--
-- A 'payload' of 65..1024 bytes is stored in 64-byte parts: 'payload' (the
-- first), 'payload:2', 'payload:3', ... (readers join them in order; see
-- django_rqueue.serialization.join_payload). Redis keeps a hash in its compact
-- listpack encoding only while every value is at most hash-max-listpack-value
-- bytes (64 by default, redis.conf; Redis docs "Memory optimization"); one
-- longer value turns the whole hash into a hashtable, about 2.5x the memory for
-- a small job. Larger payloads are stored whole (the overhead is small next to them).
--
-- Returns {outcome, job id, state}: outcome 'created'; 'duplicate' (the unique
-- key is held by a pending job, whose id is returned); 'exists' (this id was
-- already enqueued: a retried call is a no-op).
-- Writes: job hash; a group list + ring + prios + notify, or delayed + wake; unique key.
-- Derived key: base .. 'job:' .. <holder id> (the unique key's holder).
--@include now.lua
--@include push_queued.lua
--@include delayed.lua
local PAYLOAD_PART, PAYLOAD_PARTS = 64, 16
local function enqueue_job(base, jkey, prios, delayed, stats, notify, wake, ukey, id, prio,
                           group, delay, run_at, unique, unique_ttl, fields, first, last)
  local existing = redis.call('HGET', jkey, 'state')
  if existing then
    return {'exists', id, existing}
  end
  if unique ~= '' then
    local holder = redis.call('GET', ukey)
    if holder then
      local st = redis.call('HGET', base .. 'job:' .. holder, 'state')
      if st == 'scheduled' or st == 'queued' or st == 'running' then
        return {'duplicate', holder, st}
      end
    end
  end

  local now = now_ms()
  local due = now + delay
  if run_at >= 0 then
    due = run_at
  end
  local state = 'queued'
  if due > now then
    state = 'scheduled'
  end

  -- Fields at their default are left out (fewer bytes per job; readers
  -- default them): prio '0', group '', attempts 0, token 0.
  local hset = {'state', state, 'enqueued_at', now, 'run_at', due}
  if prio ~= '0' then
    hset[#hset + 1], hset[#hset + 2] = 'prio', prio
  end
  if group ~= '' then
    hset[#hset + 1], hset[#hset + 2] = 'group', group
  end
  for i = first, last - 1, 2 do
    local name, value = fields[i], fields[i + 1]
    if name == 'payload' and #value > PAYLOAD_PART and #value <= PAYLOAD_PART * PAYLOAD_PARTS then
      hset[#hset + 1], hset[#hset + 2] = name, string.sub(value, 1, PAYLOAD_PART)
      for part = 2, math.ceil(#value / PAYLOAD_PART) do
        local from = (part - 1) * PAYLOAD_PART + 1
        hset[#hset + 1], hset[#hset + 2] = 'payload:' .. part,
                                           string.sub(value, from, from + PAYLOAD_PART - 1)
      end
    else
      hset[#hset + 1], hset[#hset + 2] = name, value
    end
  end
  if unique ~= '' then
    hset[#hset + 1] = 'unique_key'
    hset[#hset + 1] = unique
    if unique_ttl > 0 then
      redis.call('SET', ukey, id, 'EX', unique_ttl)
    else
      redis.call('SET', ukey, id)
    end
  end
  redis.call('HSET', jkey, unpack(hset))

  if state == 'scheduled' then
    add_delayed(delayed, wake, id, due)
  else
    push_queued(base, prios, stats, notify, id, prio, group)
  end
  return {'created', id, state}
end
