-- dep_settle(base, id, k, value, now) -> status, ended: record the arrival `value` (an
-- arrival value, include/outcome.lua; 'g0:' opens the gate, input 0) of input `k` (digits)
-- on the waiting job `id` of this queue, exactly once.
--
-- Status: 'missed' (the job is not waiting: gone, decided, corrupt; nothing written and no
-- key created), 'duplicate' (input `k` has arrived already, or the field holds a tombstone
-- 'r<T>' and the value's token is not above T: an outcome of a run a re-arm superseded;
-- nothing written), 'arrived' (recorded, inputs still missing), 'released' (recorded, and
-- that was the last: include/node_decide.lua released it), 'ended' (recorded, the last,
-- and node_decide ended it: `ended` is its item for include/dep_notify.lua's work-list).
--
-- One HMGET and one HSET per arrival that does not complete the job: the field 'i:<k>'
-- gets `value`, 'dw' (inputs missing) goes down by 1, 'df'/'dc' up by 1 for a failure or
-- a cancel. The gate's opening also moves the job's score in base .. 'waiting' to its
-- real dependency deadline (field 'gt', then removed). Scripts run one at a time per
-- slot, so two last inputs ending "at once" are two scripts: one of them sees 'dw' reach 0.
-- Derived keys: base .. 'job:' .. id, base .. 'waiting', and those of include/node_decide.lua.
--@include node_decide_scoped.lua
--@include whole.lua
local function dep_settle(base, id, k, value, now)
  local jkey = base .. 'job:' .. id
  local field = 'i:' .. k
  local d = redis.pcall('HMGET', jkey, 's', 'dw', 'df', 'dc', 'gt', field)
  if d.err or d[1] ~= 'waiting' then
    return 'missed', nil
  end
  local kind = string.sub(value, 1, 1)
  local prev = d[6]
  if prev then
    if string.sub(prev, 1, 1) ~= 'r' then
      return 'duplicate', nil
    end
    local fence = whole(string.sub(prev, 2), 0)
    local token = whole(string.match(value, '^%a(%d+)'), 0)
    if token <= fence then
      return 'duplicate', nil
    end
  end
  local missing = whole(d[2], 1) - 1
  local hset = {field, value, 'dw', math.max(missing, 0)}
  if kind == 'f' then
    hset[5], hset[6] = 'df', whole(d[3], 0) + 1
  elseif kind == 'c' then
    hset[5], hset[6] = 'dc', whole(d[4], 0) + 1
  end
  redis.call('HSET', jkey, unpack(hset))
  if kind == 'g' and d[5] then
    redis.call('ZADD', base .. 'waiting', d[5], id)
    redis.call('HDEL', jkey, 'gt')
  end
  if missing > 0 then
    return 'arrived', nil
  end
  local ended = node_decide_scoped(base, id, now)
  if ended then
    return 'ended', ended
  end
  return 'released', nil
end
