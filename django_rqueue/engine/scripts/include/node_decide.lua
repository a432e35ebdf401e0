-- node_decide(base, id, now) -> nil when the waiting job `id` was released, else the item
-- {id, nx, 'c', token, reason, name, ''} of include/dep_notify.lua's work-list (it ended,
-- and its own dependents must hear of it). Called by include/dep_settle.lua only, in the
-- script whose write took the job's 'dw' (inputs missing) to 0: the one place a waiting
-- job leaves 'waiting' by its inputs (the sweep and the cancels end it otherwise).
--
-- One HMGET, and the job leaves base .. 'waiting'. Then, in this order:
-- * policy "cancel" (no 'dp' = 'r') and an input that did not succeed ('df' + 'dc' > 0):
--   cancelled with 'cancel_reason' 'dependency_failed' and 'finished_at' `now`, counted
--   in stats 'depcancelled', its unique key released, its waiters woken;
-- * its expiry ('exp') has come: cancelled 'expired' (include/expire_job.lua);
-- * else released: run-at = max('due' or now, now + 'rd' (the release delay, ms)); in
--   the future: scheduled (include/add_delayed.lua), else queued (include/push_queued.lua:
--   priority, group ring, pause, group cap, wake-up token); counted in stats 'released'.
-- An ended job's record expires after its result TTL ('ttl' s; 0 deletes it now): its
-- item holds what its dependents need, read before.
-- Derived keys: base .. 'job:' .. id, base .. 'waiting', base .. 'stats', base .. 'delayed',
-- base .. 'wake', base .. 'prios', base .. 'notify', base .. 'unique:' .. <'uk' field>,
-- base .. 'done:' .. id, and those of include/push_queued_many.lua.
--@include add_count.lua
--@include add_delayed.lua
--@include expire_job.lua
--@include push_queued.lua
--@include release_unique.lua
--@include stored_default.lua
--@include wake_waiters.lua
--@include whole.lua
local function node_decide(base, id, now)
  local jkey = base .. 'job:' .. id
  local d = redis.call('HMGET', jkey, 'df', 'dc', 'dp', 'prio', 'group', 'exp', 'rd', 'due', 'nx',
                       'n', 'token', 'ttl', 'uk', 'w')
  redis.call('ZREM', base .. 'waiting', id)
  local stats = base .. 'stats'
  local reason
  local expires = tonumber(d[6])
  if d[3] ~= 'r' and whole(d[1], 0) + whole(d[2], 0) > 0 then
    reason = 'dependency_failed'
    redis.call('HSET', jkey, 's', 'cancelled', 'cancel_reason', reason, 'finished_at', now)
    add_count(stats, 'depcancelled', 1)
    if d[13] then
      release_unique(base, jkey, id)
    end
    if d[14] then
      wake_waiters(base, jkey, id)
    end
  elseif expires and now >= expires then
    reason = 'expired'
    expire_job(base, jkey, stats, id, now)
  else
    local due = math.max(tonumber(d[8]) or now, now + (tonumber(d[7]) or 0))
    if due > now then
      redis.call('HSET', jkey, 's', 'scheduled', 'due', due)
      add_delayed(base .. 'delayed', base .. 'wake', id, due)
    else
      redis.call('HSET', jkey, 's', 'queued')
      push_queued(base, base .. 'prios', stats, base .. 'notify', id, d[4], d[5])
    end
    add_count(stats, 'released', 1)
    return nil
  end
  local ttl = tonumber(stored_default('ttl', d[12])) or 0
  if ttl > 0 then
    redis.call('EXPIRE', jkey, ttl)
  else
    redis.call('DEL', jkey)
  end
  return {id, d[9], 'c', d[11], reason, d[10], ''}
end
