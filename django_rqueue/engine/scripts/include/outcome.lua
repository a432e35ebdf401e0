-- outcome(kind, token, reason, name, body) -> the arrival value an input that ended leaves
-- its dependents (django_rqueue.dependencies, "Arrival value"; lengths are Lua's #, bytes):
--   kind 's' (succeeded)  's' .. token .. ':' .. body                  body: the result
--   kind 'f' (failed)     'f' .. token .. ':' .. #name .. ':' .. name .. body   body: the error
--   kind 'c' (cancelled)  'c' .. token .. ':' .. reason .. ':' .. #name .. ':' .. name
-- `token` is the input's fencing token when it ended (a string or a whole number; false: 0),
-- `name` its job name (false: ''), `body` as stored ('' on a count-only edge). String
-- concatenation only: no cjson on the ack path.
local function outcome(kind, token, reason, name, body)
  token, name = token or '0', name or ''
  if kind == 's' then
    return 's' .. token .. ':' .. body
  end
  if kind == 'f' then
    return 'f' .. token .. ':' .. #name .. ':' .. name .. body
  end
  return 'c' .. token .. ':' .. reason .. ':' .. #name .. ':' .. name
end
