-- reserve_batch(base, prios, reserved, stats, notify, lease, worker, count, rkey, request,
--               cap, interval, tolerance):
-- reserve up to `count` jobs (include/reserve_next.lua, with the group
-- concurrency cap `cap`, 0 = none) and return two values: the list of
-- reservations (each the id followed by the job hash's field/value list), and
-- `wait`, 0 unless the queue's rate limit held back jobs that are still queued,
-- then the ms until the next one may go.
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
--
-- A rate-limited queue (`interval`: ms between two jobs, a number; false: no limit)
-- hands out no more than include/rate_allowance.lua allows on its GCRA state
-- base .. 'rate', and spends only what it handed out (include/rate_spend.lua): a call
-- that finds nothing to hand out spends no slot. When the limit leaves the call short
-- of `count` while jobs are still queued, `wait` tells the caller when to come back;
-- the `notify` tokens stay (the jobs are still to do).
-- Derived keys: base .. 'paused', base .. 'rate'.
--@include reserve_next.lua
--@include rate_allowance.lua
--@include rate_spend.lua
local function reserve_batch(base, prios, reserved, stats, notify, lease, worker, count, rkey,
                             request, cap, interval, tolerance)
  local reservations = {}
  if request ~= '' then
    local prior = redis.call('GET', rkey)
    if prior then
      for id in string.gmatch(prior, '%S+') do
        local job = redis.pcall('HGETALL', base .. 'job:' .. id)
        if job.err then  -- no longer a hash (include/record_problem.lua): not ours to run
          job = {}
        end
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
  local limit, tat, now = count, 0, 0
  if interval then
    local allowed
    allowed, tat, now = rate_allowance(base .. 'rate', interval, tolerance)
    limit = math.min(count, allowed)
    if limit == 0 then
      if redis.call('EXISTS', prios) == 0 then
        redis.call('DEL', notify)  -- as reserve_next does for an empty queue
        return reservations, 0
      end
      return reservations, math.max(1, math.ceil(tat - tolerance - now))
    end
  end
  local ids = {}
  while #ids < limit do
    local got = reserve_next(base, prios, reserved, stats, notify, lease, worker, cap,
                             limit - #ids)
    if #got == 0 then
      break
    end
    for _, reservation in ipairs(got) do
      reservations[#reservations + 1] = reservation
      ids[#ids + 1] = reservation[1]
    end
  end
  if request ~= '' and #ids > 0 then
    redis.call('SET', rkey, table.concat(ids, ' '), 'PX', lease)
  end
  if not interval or #ids == 0 then
    return reservations, 0
  end
  local wait = rate_spend(base .. 'rate', interval, tolerance, tat, #ids, now)
  if #ids == limit and limit < count and redis.call('EXISTS', prios) == 1 then
    return reservations, math.max(1, wait)
  end
  return reservations, 0
end
