-- record_error(jkey, err, now): store `err` (opaque JSON made by Python) as the
-- job's current error and append it to its history err:1, err:2, ..., with the
-- Redis time `now` (ms) it was recorded in err_at:1, err_at:2, ...
-- A count 'nerr' that is not an integer (a corrupt record) restarts the history at 1
-- instead of failing the script half-way (HINCRBY refuses it).
local function record_error(jkey, err, now)
  local n = redis.pcall('HINCRBY', jkey, 'nerr', 1)
  if type(n) ~= 'number' then
    n = 1
    redis.call('HSET', jkey, 'nerr', n)
  end
  redis.call('HSET', jkey, 'error', err, 'err:' .. n, err, 'err_at:' .. n, now)
end
