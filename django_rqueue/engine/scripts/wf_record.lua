-- wf_record: every change of a workflow's record, in its home queue's slot.
--
-- KEYS[1] home queue base   KEYS[2] record "<base>wf:<workflow id>"   KEYS[3] wfs zset
-- KEYS[4] wfopen zset   KEYS[5] stats hash
-- ARGV[1] mode   ARGV[2] workflow id   then, by mode:
--   create     ARGV[3..] field/value pairs          none -> running          {'ok'} | {'exists'}
--   open       ARGV[3] grace ms, ARGV[4..] pairs     none -> creating         {'ok'} | {'exists'}
--   commit     ARGV[3] grace ms                      creating -> running      {'ok'} | {'gone'} | {'state', st}
--   opened     (none)                                leaves wfopen            {'ok'}
--   reopened   (none)                                reopening -> running     {'ok'} | {'gone'} | {'state', st}
--   abort      (none)                                creating -> deleted      {'ok'} | {'gone'} | {'state', st}
--   cancel     (none)                                running|cancelling -> cancelling
--                                                                            {'ok', previous} | {'gone'} | {'state', st}
--   finish     ARGV[3] computed state (succeeded|failed), ARGV[4] result as stored ('' none),
--              ARGV[5] TTL s (0: delete at once)     running|reopening -> computed,
--                                                    cancelling -> cancelled
--                                                    {'first'|'done', st, gen} | {'gone'} | {'state', st}
--   signalled  ARGV[3] generation                    records the signal sent  {'ok'} | {'gone'}
--   reopen     ARGV[3] grace ms, ARGV[4] plan (JSON) failed -> reopening      {'ok', gen} | {'gone'} | {'state', st}
--
-- Field names are those of engine.fields.WorkflowFields: 'st' state, 't0' created, 't1'
-- finished, 'gen' finish generation, 'sig' the generation signalled, 'res' result, 'plan'.
-- Counts (stats): 'wfstarted' when a workflow starts running (create, commit, reopen),
-- 'wfsucceeded', 'wffailed' or 'wfcancelled' when it finishes (finish, the first time only).
-- A final record expires after ARGV[5] seconds (the home queue's result_ttl); it has no TTL
-- while it runs, and reopen removes it again (PERSIST).

--@include now_ms.lua
--@include add_count.lua

local record, wfs, opening, stats = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode, wf = ARGV[1], ARGV[2]

local FINAL = {succeeded = true, failed = true, cancelled = true}

local function state()
  local ok, st = pcall(redis.call, 'HGET', record, 'st')
  if not ok then
    return 'corrupt'
  end
  return st
end

-- Write a new record in state `first` with the field/value pairs ARGV[from..]; false when
-- it exists already (a creation sent again).
local function write(first, now, from)
  if redis.call('EXISTS', record) == 1 then
    return false
  end
  local fields = {'HSET', record, 'st', first, 't0', now, 'gen', 0}
  for i = from, #ARGV do
    fields[#fields + 1] = ARGV[i]
  end
  redis.call(unpack(fields))
  redis.call('ZADD', wfs, now, wf)
  return true
end

local now = now_ms()

if mode == 'create' then
  if not write('running', now, 3) then
    return {'exists'}
  end
  add_count(stats, 'wfstarted', 1)
  return {'ok'}
end

if mode == 'open' then
  if not write('creating', now, 4) then
    return {'exists'}
  end
  redis.call('ZADD', opening, now + tonumber(ARGV[3]), wf)
  return {'ok'}
end

if mode == 'opened' then
  redis.call('ZREM', opening, wf)
  return {'ok'}
end

local st = state()
if not st then
  return {'gone'}
end

if mode == 'commit' then
  if st ~= 'creating' then
    return {'state', st}
  end
  redis.call('HSET', record, 'st', 'running')
  -- From now on the workflow exists: a stalled creation is rolled forward by then.
  redis.call('ZADD', opening, now + tonumber(ARGV[3]), wf)
  add_count(stats, 'wfstarted', 1)
  return {'ok'}
end

if mode == 'abort' then
  if st ~= 'creating' then
    return {'state', st}
  end
  redis.call('DEL', record)
  redis.call('ZREM', wfs, wf)
  redis.call('ZREM', opening, wf)
  return {'ok'}
end

if mode == 'reopened' then
  if st ~= 'reopening' then
    return {'state', st}
  end
  redis.call('HSET', record, 'st', 'running')
  redis.call('HDEL', record, 'plan')
  redis.call('ZREM', opening, wf)
  return {'ok'}
end

if mode == 'cancel' then
  if st ~= 'running' and st ~= 'cancelling' then
    return {'state', st}
  end
  redis.call('HSET', record, 'st', 'cancelling')
  return {'ok', st}
end

if mode == 'finish' then
  local gen = redis.call('HGET', record, 'gen') or '0'
  if FINAL[st] then
    return {'done', st, gen}
  end
  local final = ARGV[3]
  if st == 'cancelling' then
    final = 'cancelled'
  elseif st ~= 'running' and st ~= 'reopening' then
    return {'state', st}
  end
  redis.call('HSET', record, 'st', final, 't1', now)
  redis.call('ZREM', opening, wf)
  if ARGV[4] ~= '' then
    redis.call('HSET', record, 'res', ARGV[4])
  end
  if final == 'succeeded' then
    add_count(stats, 'wfsucceeded', 1)
  elseif final == 'failed' then
    add_count(stats, 'wffailed', 1)
  else
    add_count(stats, 'wfcancelled', 1)
  end
  local ttl = tonumber(ARGV[5])
  if ttl > 0 then
    redis.call('EXPIRE', record, ttl)
  else
    redis.call('DEL', record)
    redis.call('ZREM', wfs, wf)
  end
  return {'first', final, gen}
end

if mode == 'signalled' then
  redis.call('HSET', record, 'sig', ARGV[3])
  return {'ok'}
end

if mode == 'reopen' then
  if st ~= 'failed' then
    return {'state', st}
  end
  local gen = redis.call('HINCRBY', record, 'gen', 1)
  redis.call('HSET', record, 'st', 'reopening', 'plan', ARGV[4])
  redis.call('HDEL', record, 't1', 'res', 'lost')
  redis.call('PERSIST', record)
  redis.call('ZADD', opening, now + tonumber(ARGV[3]), wf)
  add_count(stats, 'wfstarted', 1)
  return {'ok', gen}
end

return redis.error_reply('ERR rqueue: wf_record: unknown mode ' .. tostring(mode))
