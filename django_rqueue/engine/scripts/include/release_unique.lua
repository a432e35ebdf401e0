-- release_unique(base, jkey, id): drop the job's unique key if this job still holds it.
-- Derived key: base .. 'unique:' .. <'uk' field>
local function release_unique(base, jkey, id)
  local uk = redis.call('HGET', jkey, 'uk')
  if uk then
    local ukey = base .. 'unique:' .. uk
    if redis.call('GET', ukey) == id then
      redis.call('DEL', ukey)
    end
  end
end
