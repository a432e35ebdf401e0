-- stored_default(field, value) -> `value` (an HGET/HMGET of the job-hash field `field`),
-- or, when the hash leaves that field out (`value` is false), the value its absence
-- stands for: enqueues write 'max', 'tmo' and 'ttl' only when they differ from these
-- (django_rqueue.engine.fields.RECORD_DEFAULTS; tests/engine/test_keys.py checks that the
-- two agree). Values are numbers; a stored value is returned as Redis gave it.
local RECORD_DEFAULTS = {max = 3, tmo = 300000, ttl = 86400}
local function stored_default(field, value)
  if value then
    return value
  end
  return RECORD_DEFAULTS[field]
end
