-- token_mismatch(state, current, token): nil when a job's `state` and `current` token
-- (as the caller read them, maybe with other fields in one HMGET) say it is running
-- under `token`, else a reply {'stale', state, current token} that the caller returns
-- unchanged.
local function token_mismatch(state, current, token)
  if state ~= 'running' or current ~= token then
    return {'stale', state or '', current or ''}
  end
  return nil
end
