-- fail_corrupt(base, jkey, stats, id, now, problem): end the job `id` whose record
-- cannot be used (`problem`, from include/record_problem.lua's record_problem) in the
-- failed store, so that whatever held it (its group list, `delayed`, `reserved`) goes on
-- without it and staff see it. The caller has already taken `id` out of that structure.
--
-- A record that is not a hash cannot hold fields: it is deleted and a new hash made in
-- its place (the foreign value is not kept). Either way the record gets state failed
-- and the error {"type": "builtins.ValueError", "message": "job record is corrupt:
-- <problem>", "traceback": ""} (the shape of django_rqueue.execution.error_record) in its
-- history, and the job joins the failed zset base .. 'failed' as move_to_failed does
-- (counted in `stats` 'failed' and this minute's throughput). The failed store's
-- retention is applied by the poller's next round, not here. A retry() of such a job
-- runs whatever the record still holds (a worker fails a record without a job name).
-- A hash that still names dependents ('nx') delivers the failure to them, with that error
-- (include/move_to_failed.lua's `links`: one more HMGET, paid by corrupt records only).
-- Derived keys: base .. 'failed', and those of include/move_to_failed.lua.
--@include move_to_failed.lua
--@include record_error.lua
local function fail_corrupt(base, jkey, stats, id, now, problem)
  local links = nil
  if redis.call('TYPE', jkey)['ok'] ~= 'hash' then
    redis.call('DEL', jkey)
    redis.call('HSET', jkey, 'at', now)
  else
    links = redis.call('HMGET', jkey, 'nx', 'token', 'n')
  end
  local err = cjson.encode({type = 'builtins.ValueError',
                            message = 'job record is corrupt: ' .. problem, traceback = ''})
  record_error(jkey, err, now)
  if links and links[1] then
    links[4] = err
  else
    links = nil
  end
  move_to_failed(base, jkey, base .. 'failed', stats, id, now, links)
end
