-- Creating jobs, shared by enqueue.lua (one job) and enqueue_batch.lua (many
-- jobs of one delay_many call, which share every option).
--
-- enqueue_job(base, jkey, prios, delayed, stats, notify, wake, ukey, id, prio,
--             group, delay, run_at, unique, unique_ttl, fields, first, last)
-- -> {outcome, id, state[, enqueued at]}: create_job, then link the one job; outcome
-- 'created' (with the time it was enqueued, ms, as its record holds it) or a refusal.
-- A created job is counted in `stats` field 'enqueued'.
--@include add_count.lua
--@include add_delayed.lua
--@include create_job.lua
--@include now_ms.lua
--@include push_queued.lua
--@include schedule.lua
local function enqueue_job(base, jkey, prios, delayed, stats, notify, wake, ukey, id, prio,
                           group, delay, run_at, unique, unique_ttl, fields, first, last)
  local now = now_ms()
  local due, state = schedule(now, delay, run_at)
  local refused = create_job(base, jkey, ukey, id, unique, unique_ttl, now, due, state, prio,
                             group, fields, first, last)
  if refused then
    return refused
  end
  add_count(stats, 'enqueued', 1)
  if state == 'scheduled' then
    add_delayed(delayed, wake, id, due)
  else
    push_queued(base, prios, stats, notify, id, prio, group)
  end
  return {'created', id, state, now}
end
