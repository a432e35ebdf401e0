-- record_error(jkey, err): store `err` (opaque JSON made by Python) as the
-- job's current error and append it to its history err:1, err:2, ...
local function record_error(jkey, err)
  local n = redis.call('HINCRBY', jkey, 'nerr', 1)
  redis.call('HSET', jkey, 'error', err, 'err:' .. n, err)
end
