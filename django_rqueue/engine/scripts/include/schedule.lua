-- schedule(now, delay, run_at) -> due ms, state: `run_at` (ms since the epoch,
-- used when >= 0) or now + `delay` ms; 'scheduled' when that is in the future,
-- else 'queued'.
local function schedule(now, delay, run_at)
  local due = now + delay
  if run_at >= 0 then
    due = run_at
  end
  if due > now then
    return due, 'scheduled'
  end
  return due, 'queued'
end
