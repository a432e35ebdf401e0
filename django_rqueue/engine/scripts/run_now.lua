-- run_now: queue a scheduled job at once instead of at its run-at time.
--
-- KEYS[1] queue base (derives group:<prio>:<group>, ring:<prio>)   KEYS[2] job hash
-- KEYS[3] delayed zset   KEYS[4] prios zset   KEYS[5] stats hash   KEYS[6] notify list
-- ARGV[1] job id
--
-- Returns {'ok'} or {'state', current state ('' when the job does not exist, 'corrupt'
-- when its record is not a hash or has no state: include/record_problem.lua)};
-- only a job in state scheduled is changed ('due' becomes now).

--@include now_ms.lua
--@include push_queued.lua
--@include read_in_state.lua

local base, jkey, delayed, prios, stats, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]
local job, refusal = read_in_state(jkey, 'scheduled', 'prio', 'group')
if not job then
  return refusal
end
redis.call('ZREM', delayed, id)
redis.call('HSET', jkey, 's', 'queued', 'due', now_ms())
push_queued(base, prios, stats, notify, id, job[2], job[3])
return {'ok'}
