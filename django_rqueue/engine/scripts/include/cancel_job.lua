-- cancel_job(base, jkey, delayed, failed, prios, stats, id, job, mode, ttl) -> the reply of
-- cancel.lua for the job `id`, whose record was read as `job` = {state, prio, group}
-- (include/read_record.lua; a readable record): mode 'cancel' withdraws a scheduled,
-- queued or failed job (state cancelled, 'finished_at' now, the record kept `ttl` s), or
-- asks a running one to stop ('cx', the Redis time in ms of the first request: its worker's
-- master ends it with cancel_running.lua); mode 'delete' removes any job that is not
-- running. The job leaves the structure of its state (`delayed`, its group list:
-- include/unlink_queued.lua, `failed`), its unique key is released and its waiters are
-- woken (include/wake_waiters.lua).
-- Returns {'ok', previous state}, {'requested', 'running'}, or {'state', current state
-- ('' when missing)} when the job is running (mode delete) or already finished (mode
-- cancel): then nothing changed.
-- Derived keys: base .. 'group:' .. prio .. ':' .. group, base .. 'ring:' .. prio,
-- base .. 'parked:' .. group, base .. 'unique:' .. <'uk' field>, base .. 'done:' .. id.
--@include now_ms.lua
--@include release_unique.lua
--@include unlink_queued.lua
--@include wake_waiters.lua
local function cancel_job(base, jkey, delayed, failed, prios, stats, id, job, mode, ttl)
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
  if st == 'scheduled' then
    redis.call('ZREM', delayed, id)
  elseif st == 'queued' then
    unlink_queued(base, prios, stats, id, job[2], job[3])
  elseif st == 'failed' then
    redis.call('ZREM', failed, id)
  end
  release_unique(base, jkey, id)
  wake_waiters(base, jkey, id)
  if mode == 'delete' then
    redis.call('DEL', jkey)
  else
    redis.call('HSET', jkey, 's', 'cancelled', 'finished_at', now_ms())
    redis.call('EXPIRE', jkey, ttl)
  end
  return {'ok', st}
end
