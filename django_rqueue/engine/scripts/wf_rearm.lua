-- wf_rearm: one step of Workflow.retry_failed() on the nodes of one queue: re-arm nodes
-- that a failure cancelled (and the finisher), or put failed nodes back in their queue.
--
-- KEYS[1] queue base (derives job:<id>, waiting, done:<id>, and the keys of
--         include/push_queued.lua: group:<prio>:<group>, ring:<prio>, paused, groupfull,
--         parked:<group>, wake)
-- KEYS[2] failed zset   KEYS[3] prios zset   KEYS[4] stats hash   KEYS[5] notify list
-- ARGV[1] dependency deadline of a re-armed node, ms from now (-1: none), then items:
--   op, id, token, m, then m pairs (k, T)
-- `token` is the node's fencing token when the retry was planned: an item applies only
-- to a node that still has it (so a replay, or a node that moved on, is skipped).
--
-- op 'arm': only a node 'cancelled' with 'cancel_reason' 'dependency_failed', a 'failed'
-- node (one whose inputs run again: policy "run"), or the finisher ('nx' is 'w')
-- 'succeeded' or 'failed'. Each pair writes the tombstone 'r<T>'
-- in its input field 'i:<k>' ("not arrived; accept only an outcome whose token is above
-- T": include/dep_settle.lua); a field that held an arrival counts missing again ('dw'
-- + 1, 'df'/'dc' - 1 for a failure/cancel). The node is 'waiting' again (in
-- base .. 'waiting' at the deadline, the finisher without one; out of `failed`), with
-- 'attempts' 0, no 'finished_at', 'cancel_reason', 'result', 'cx', 'cxw', no TTL, no
-- wake-up token left in base .. 'done:' .. id, and 'token' + 1 (its next outcome is
-- above the tombstones its own dependents got). An arm that would leave nothing
-- missing is skipped.
-- op 'requeue': only a 'failed' node: out of `failed`, 'queued' (include/push_queued.lua)
-- with 'attempts' 0, 'due' now, no 'finished_at', no TTL, and 'token' + 1 (as retry.lua,
-- plus the token).
-- Returns, per item in order, 'done' or 'skip'; a malformed ARGV is refused before anything
-- is written.

--@include now_ms.lua
--@include push_queued.lua
--@include whole.lua

local base, failed, prios, stats, notify = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local deadline = tonumber(ARGV[1])
if not deadline then
  return redis.error_reply('ERR rqueue wf_rearm: bad deadline ' .. tostring(ARGV[1]))
end
local now = now_ms()
local score = '+inf'
if deadline >= 0 then
  score = now + deadline
end

local function arm(id, token, from, m)
  local jkey = base .. 'job:' .. id
  local job = redis.pcall('HMGET', jkey, 's', 'cancel_reason', 'token', 'nx', 'dw', 'df', 'dc')
  if job.err or whole(job[3], 0) ~= token then
    return 'skip'
  end
  local finisher = job[4] == 'w'
  local st = job[1]
  if not ((st == 'cancelled' and job[2] == 'dependency_failed') or st == 'failed'
          or (finisher and st == 'succeeded')) then
    return 'skip'
  end
  local dw, df, dc = whole(job[5], 0), whole(job[6], 0), whole(job[7], 0)
  local hset = {}
  for i = from, from + 2 * m - 1, 2 do
    local field = 'i:' .. ARGV[i]
    local prev = redis.call('HGET', jkey, field)
    local kind = prev and string.sub(prev, 1, 1)
    if kind and kind ~= 'r' then
      dw = dw + 1
      if kind == 'f' then
        df = math.max(df - 1, 0)
      elseif kind == 'c' then
        dc = math.max(dc - 1, 0)
      end
    end
    hset[#hset + 1] = field
    hset[#hset + 1] = 'r' .. ARGV[i + 1]
  end
  if dw == 0 then
    return 'skip'
  end
  redis.call('HSET', jkey, 's', 'waiting', 'dw', dw, 'df', df, 'dc', dc, 'attempts', 0,
             unpack(hset))
  redis.call('HDEL', jkey, 'finished_at', 'cancel_reason', 'result', 'cx', 'cxw')
  redis.call('HINCRBY', jkey, 'token', 1)
  redis.call('PERSIST', jkey)
  if st == 'failed' then
    redis.call('ZREM', failed, id)
  end
  if finisher then
    redis.call('ZADD', base .. 'waiting', '+inf', id)
  else
    redis.call('ZADD', base .. 'waiting', score, id)
  end
  redis.call('DEL', base .. 'done:' .. id)
  return 'done'
end

local function requeue(id, token)
  local jkey = base .. 'job:' .. id
  local job = redis.pcall('HMGET', jkey, 's', 'token', 'prio', 'group')
  if job.err or job[1] ~= 'failed' or whole(job[2], 0) ~= token then
    return 'skip'
  end
  redis.call('ZREM', failed, id)
  redis.call('HSET', jkey, 's', 'queued', 'attempts', 0, 'due', now)
  redis.call('HDEL', jkey, 'finished_at')
  redis.call('HINCRBY', jkey, 'token', 1)
  redis.call('PERSIST', jkey)
  push_queued(base, prios, stats, notify, id, job[3], job[4])
  return 'done'
end

local items = {}
local i = 2
while i <= #ARGV do
  local op, id, token, m = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if not token or not m or m < 0 or i + 3 + 2 * m > #ARGV
     or (op ~= 'arm' and op ~= 'requeue') then
    return redis.error_reply('ERR rqueue wf_rearm: bad item at ARGV[' .. i .. ']')
  end
  items[#items + 1] = {op, id, token, i + 4, m}
  i = i + 4 + 2 * m
end
local replies = {}
for _, item in ipairs(items) do
  if item[1] == 'arm' then
    replies[#replies + 1] = arm(item[2], item[3], item[4], item[5])
  else
    replies[#replies + 1] = requeue(item[2], item[3])
  end
end
return replies
