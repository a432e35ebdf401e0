-- retry: put a failed job back in its queue with a fresh attempt budget.
--
-- KEYS[1] queue base (derives group:<prio>:<group>, ring:<prio>)   KEYS[2] job hash
-- KEYS[3] failed zset   KEYS[4] prios zset   KEYS[5] stats hash   KEYS[6] notify list
-- ARGV[1] job id
--
-- Returns {'ok'} or {'state', current state ('' when the job does not exist, 'corrupt'
-- when its record is not a hash or has no state: include/record_problem.lua)};
-- only a job in state failed is changed. Attempts go back to 0; the error
-- history is kept. A node of a workflow (field 'wf') is not retried on its own: its
-- workflow's retry_failed() re-runs it and re-arms what it cancelled; the reply is then
-- {'member', workflow id} and nothing changed.

--@include now_ms.lua
--@include push_queued.lua
--@include read_in_state.lua

local base, jkey, failed, prios, stats, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]
local job, refusal = read_in_state(jkey, 'failed', 'prio', 'group', 'wf')
if not job then
  return refusal
end
if job[4] then
  return {'member', job[4]}
end
redis.call('ZREM', failed, id)
redis.call('HSET', jkey, 's', 'queued', 'attempts', 0, 'due', now_ms())
redis.call('HDEL', jkey, 'finished_at')
redis.call('PERSIST', jkey)
push_queued(base, prios, stats, notify, id, job[2], job[3])
return {'ok'}
