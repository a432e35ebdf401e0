-- wf_trim: forget the workflows of a queue whose record is gone (expired after they
-- finished, or deleted), so that its list of workflows does not grow for ever.
--
-- KEYS[1] queue base (derives wf:<workflow id>)   KEYS[2] wfs zset
-- ARGV[1] first rank to look at (0: the oldest)   ARGV[2] how many to look at, at most
--
-- Looks at the members of `wfs` from rank ARGV[1] on, oldest first, and removes those
-- whose record does not exist. Returns {removed, next rank} where the next rank is where
-- the caller goes on (0: the end was reached, start again from the oldest). A record
-- still there (a workflow running, or finished and kept) is passed over, never removed.

local base, wfs = KEYS[1], KEYS[2]
local first, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids = redis.call('ZRANGE', wfs, first, first + limit - 1)
local removed = 0
for _, wf in ipairs(ids) do
  if redis.call('EXISTS', base .. 'wf:' .. wf) == 0 then
    redis.call('ZREM', wfs, wf)
    removed = removed + 1
  end
end
if #ids < limit then
  return {removed, 0}
end
return {removed, first + #ids - removed}
