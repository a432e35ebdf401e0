-- create_job(base, jkey, ukey, id, unique, unique_ttl, now, due, state, prio,
--            group, fields, first, last) -> nil when created, else the refusal
-- {outcome, id, state}: 'exists' (this id was already enqueued: a resent call
-- is a no-op) or 'duplicate' (the unique key is held by a pending job, a waiting
-- one included, whose id and state are returned). Writes the job hash (and the unique
-- key) only: the caller links the job into its group list or the delayed zset. `prio` is a
-- validated integer string, `unique` '' for none, `unique_ttl` seconds (0 =
-- until terminal); fields[first..last] are field, value pairs copied into the
-- hash ('n', 'p', 'max', 'tmo', 'ttl', 'exp'), except 'exp_in' (an expiry relative to
-- the enqueue, ms), stored as 'exp' = now + its value: the job's expiry on the Redis clock.
--
-- Job hash fields (names as in django_rqueue.engine.fields.JobFields): 's' state,
-- 'at' enqueued-at ms, 'due' run-at ms, 'n' job name, 'p' payload, 'max'
-- max attempts, 'tmo' timeout ms, 'ttl' result TTL s, 'uk' unique key, 'exp'
-- expiry ms (include/expire_if_due.lua).
-- Fields at their default are left out of the hash (fewer bytes per job;
-- readers default them): prio '0', group '', attempts 0, token 0, and 'due'
-- when it equals 'at' (a job queued to run now).
--
-- A payload ('p') of 65..1071 bytes is stored in 63-byte parts: 'p' (the
-- first), 'p:2', 'p:3', ... (readers join them in order, whatever their sizes; see
-- django_rqueue.serialization.join_payload). Redis keeps a hash in its compact
-- listpack encoding only while every value is at most hash-max-listpack-value
-- bytes (64 by default, redis.conf; Redis docs "Memory optimization"); one
-- longer value turns the whole hash into a hashtable, about 2.5x the memory for
-- a small job. 63 bytes, not 64: a listpack entry of a string up to 63 bytes has a
-- 1-byte header, a longer one 2 bytes (Redis's listpack.md, "Encoding type"); the
-- bench's 69-byte payload then fits a 127-byte listpack, in jemalloc's 128-byte size
-- class instead of the 160-byte one. Larger payloads are stored whole
-- (the overhead is small next to them).
-- A key of another type at `jkey` (a caller-chosen id over a corrupt record:
-- include/record_problem.lua) fails the script with the error 'ERR rqueue enqueue: job
-- record <id> is corrupt: it is a <type>, not a hash' before anything is written (only
-- single enqueues choose ids); a unique key's holder whose record is not a hash does
-- not hold it.
-- Derived key: base .. 'job:' .. <holder id> (the unique key's holder).
--@include record_problem.lua
local PAYLOAD_WHOLE, PAYLOAD_PART, PAYLOAD_PARTS = 64, 63, 17
local function create_job(base, jkey, ukey, id, unique, unique_ttl, now, due, state, prio,
                          group, fields, first, last)
  local existing = redis.pcall('HGET', jkey, 's')
  if type(existing) == 'table' then
    error(redis.error_reply('ERR rqueue enqueue: job record ' .. id .. ' is corrupt: '
                            .. (record_problem(jkey) or 'unreadable')))
  end
  if existing then
    return {'exists', id, existing}
  end
  if unique ~= '' then
    local holder = redis.call('GET', ukey)
    if holder then
      local st = redis.pcall('HGET', base .. 'job:' .. holder, 's')
      if st == 'scheduled' or st == 'queued' or st == 'running' or st == 'waiting' then
        return {'duplicate', holder, st}
      end
    end
  end

  local hset = {'s', state, 'at', now}
  if due ~= now then
    hset[5], hset[6] = 'due', due
  end
  if prio ~= '0' then
    hset[#hset + 1], hset[#hset + 2] = 'prio', prio
  end
  if group ~= '' then
    hset[#hset + 1], hset[#hset + 2] = 'group', group
  end
  for i = first, last - 1, 2 do
    local name, value = fields[i], fields[i + 1]
    if name == 'exp_in' then
      hset[#hset + 1], hset[#hset + 2] = 'exp', now + tonumber(value)
    elseif name == 'p' and #value > PAYLOAD_WHOLE and #value <= PAYLOAD_PART * PAYLOAD_PARTS then
      hset[#hset + 1], hset[#hset + 2] = name, string.sub(value, 1, PAYLOAD_PART)
      for part = 2, math.ceil(#value / PAYLOAD_PART) do
        local from = (part - 1) * PAYLOAD_PART + 1
        hset[#hset + 1], hset[#hset + 2] = 'p:' .. part,
                                           string.sub(value, from, from + PAYLOAD_PART - 1)
      end
    else
      hset[#hset + 1], hset[#hset + 2] = name, value
    end
  end
  if unique ~= '' then
    hset[#hset + 1], hset[#hset + 2] = 'uk', unique
    if unique_ttl > 0 then
      redis.call('SET', ukey, id, 'EX', unique_ttl)
    else
      redis.call('SET', ukey, id)
    end
  end
  redis.call('HSET', jkey, unpack(hset))
  return nil
end
