-- cancel_job(base, jkey, delayed, failed, prios, stats, id, job, mode, ttl, reason) -> the
-- reply of cancel.lua for the job `id`, whose record was read as `job` = {state, prio,
-- group, nx, n, token} (include/read_record.lua; a readable record): mode 'cancel'
-- withdraws a waiting, scheduled, queued or failed job (state cancelled, 'finished_at'
-- now, 'cancel_reason' `reason` unless it is '' or nil, the record kept `ttl` s), or asks
-- a running one to stop ('cx', the Redis time in ms of the first request: its worker's
-- master ends it with cancel_running.lua); mode 'delete' removes any job that is not
-- running. The job leaves the structure of its state (base .. 'waiting', `delayed`, its
-- group list: include/unlink_queued.lua, `failed`), its unique key is released and its
-- waiters are woken (include/wake_waiters.lua).
-- A waiting, scheduled or queued job with dependents ('nx') tells them it was cancelled
-- (include/dep_notify.lua, kind 'c', reason `reason` or '', 'deleted' in mode delete),
-- after its state is written and before its record is deleted; a failed, succeeded or
-- cancelled one told them when it ended.
-- Returns {'ok', previous state}, {'requested', 'running'}, or {'state', current state
-- ('' when missing)} when the job is running (mode delete) or already finished (mode
-- cancel): then nothing changed.
-- Derived keys: base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio,
-- base .. 'parked:' .. group, base .. 'unique:' .. <'uk' field>, base .. 'done:' .. id,
-- base .. 'waiting', and those of include/dep_notify.lua.
--@include dep_notify.lua
--@include now_ms.lua
--@include release_unique.lua
--@include unlink_queued.lua
--@include wake_waiters.lua
local function cancel_job(base, jkey, delayed, failed, prios, stats, id, job, mode, ttl, reason)
  local st = job[1]
  if st == 'running' and mode == 'cancel' then
    redis.call('HSETNX', jkey, 'cx', now_ms())
    return {'requested', st}
  end
  if not st or st == 'running' then
    return {'state', st or ''}
  end
  if mode == 'cancel' and (st == 'succeeded' or st == 'cancelled') then
    return {'state', st}
  end
  local pending = true
  if st == 'scheduled' then
    redis.call('ZREM', delayed, id)
  elseif st == 'queued' then
    unlink_queued(base, prios, stats, id, job[2], job[3])
  elseif st == 'waiting' then
    redis.call('ZREM', base .. 'waiting', id)
  else
    pending = false
    if st == 'failed' then
      redis.call('ZREM', failed, id)
    end
  end
  release_unique(base, jkey, id)
  wake_waiters(base, jkey, id)
  local nx = pending and job[4]
  reason = reason or ''
  if mode == 'delete' then
    if nx then
      dep_notify(base, {{id, nx, 'c', job[6], 'deleted', job[5], ''}}, now_ms())
    end
    redis.call('DEL', jkey)
  else
    local now = now_ms()
    if reason ~= '' then
      redis.call('HSET', jkey, 's', 'cancelled', 'finished_at', now, 'cancel_reason', reason)
    else
      redis.call('HSET', jkey, 's', 'cancelled', 'finished_at', now)
    end
    if nx then
      dep_notify(base, {{id, nx, 'c', job[6], reason, job[5], ''}}, now)
    end
    redis.call('EXPIRE', jkey, ttl)
  end
  return {'ok', st}
end
