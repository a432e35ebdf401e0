-- whole(value, default) -> `value` (a job-hash field as read: a string, or false when
-- absent) as a whole number from 0 to 2^53 - 1, or `default` when it is none ('abc',
-- '1.5', 'nan', 'inf', '-1', absent): the counters of a record ('token', 'attempts',
-- 'max') are compared and written back as arithmetic on them, which must neither fail
-- the script half-way nor store a value Python cannot read.
local function whole(value, default)
  local n = tonumber(value)
  if not n or n ~= n or n < 0 or n >= 9007199254740992 or n % 1 ~= 0 then
    return default
  end
  return n
end
