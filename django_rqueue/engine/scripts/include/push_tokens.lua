-- push_tokens(notify, count): append `count` wake-up tokens ('1') to the list
-- `notify` in one RPUSH (none when `count` <= 0); idle workers BLPOP one each.
-- Callers keep the list at most NOTIFY_TOKENS long: more tokens than idle
-- workers only wake them for empty reserves.
local NOTIFY_TOKENS = 64
local function push_tokens(notify, count)
  if count <= 0 then
    return
  end
  local ones = {}
  for i = 1, count do
    ones[i] = '1'
  end
  redis.call('RPUSH', notify, unpack(ones))
end
