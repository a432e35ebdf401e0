-- reserve_batch(base, prios, reserved, stats, notify, lease, worker, count, rkey, request,
--               cap):
-- reserve up to `count` jobs (include/reserve_next.lua each, with the group
-- concurrency cap `cap`, 0 = none) and return two values: the list of
-- reservations (each the id followed by the job hash's field/value list), and
-- `wait`, the ms until the queue may hand out more (always 0).
--
-- Idempotent per `request` (a random id the caller makes per call; '' = none):
-- the ids handed out are remembered in `rkey` (a string, space-separated ids,
-- expiring with the lease), and the same request sent again (redis-py resends
-- a command whose reply a broken connection lost) returns those same jobs, if
-- still running for `worker`, instead of reserving more. Without this, the
-- first reservation would sit orphaned until its lease expired, each job
-- charged an attempt it never ran (the idempotency-key pattern of HTTP APIs).
--
-- A paused queue (its key base .. 'paused' exists, rqueue_pause) reserves
-- nothing new: `notify` is cleared as for an empty queue, so idle workers
-- block until resume.lua leaves them wake-up tokens. A resent request still
-- gets the jobs it reserved before the pause (they are running).
-- Derived key: base .. 'paused'.
--@include reserve_next.lua
local function reserve_batch(base, prios, reserved, stats, notify, lease, worker, count, rkey,
                             request, cap)
  local reservations = {}
  if request ~= '' then
    local prior = redis.call('GET', rkey)
    if prior then
      for id in string.gmatch(prior, '%S+') do
        local job = redis.call('HGETALL', base .. 'job:' .. id)
        local fields = {}
        for i = 1, #job, 2 do
          fields[job[i]] = job[i + 1]
        end
        if fields['s'] == 'running' and fields['worker'] == worker then
          table.insert(job, 1, id)
          reservations[#reservations + 1] = job
        end
      end
      return reservations, 0
    end
  end
  if redis.call('EXISTS', base .. 'paused') == 1 then
    redis.call('DEL', notify)
    return reservations, 0
  end
  local ids = {}
  for _ = 1, count do
    local got = reserve_next(base, prios, reserved, stats, notify, lease, worker, cap)
    if not got then
      break
    end
    reservations[#reservations + 1] = got
    ids[#ids + 1] = got[1]
  end
  if request ~= '' and #ids > 0 then
    redis.call('SET', rkey, table.concat(ids, ' '), 'PX', lease)
  end
  return reservations, 0
end
