-- dep_notify(base, items, now): deliver the outcome of jobs of this queue that just ended
-- to their dependents; the one emitter, called by every terminal transition that read a
-- job's 'nx' (its dependents) and found one (a job without dependents never gets here).
--
-- `items` is a work-list (a Lua array) of {id, nx, kind, token, reason, name, body}: the
-- job that ended, its 'nx' field, and its outcome as include/outcome.lua takes it (`kind`
-- 's', 'f' or 'c'; `body` the result or the error record as stored). 'nx' holds entries
-- separated by one space (django_rqueue.dependencies): an edge '<copy><path><k>:<id>'
-- ('p' delivers the body, 'c' the outcome only; 'i' inline, 'o' through the outbox), '+'
-- (also deliver to the edges linked later, in base .. 'next:' .. id, which is then
-- deleted), 'w' (the job is a workflow's finisher, '<workflow id>.f': a workflow whose
-- record base .. 'wf:' .. <workflow id> is not final yet ends 'failed', 'lost' 1,
-- 't1' now, counted in stats 'wffailed', and expires after the finisher's result TTL).
--
-- An inline edge to a job of this same queue is settled here (include/dep_settle.lua); a
-- dependent it ends (cancelled 'dependency_failed', or expired) is appended to the
-- work-list with kind 'c', so a cancel cascades down a chain breadth first, with no
-- recursion. At most CASCADE_MAX inline settles per call: past that, and for every 'o'
-- edge (and an 'i' edge to another queue), the value goes to this queue's outbox stream
-- base .. 'outbox' (fields 'd' dependent id, 'x' input index, 'v' value) with one wake-up
-- token on base .. 'wake' for the pollers (at most 16 there), whose relay applies it with
-- dep_apply.lua on the dependent's queue. Entries that are not edges are skipped.
-- Derived keys: base .. 'next:' .. id, base .. 'outbox', base .. 'wake',
-- base .. 'wf:' .. <workflow id>, base .. 'job:' .. id, base .. 'stats', and those of
-- include/dep_settle.lua.
--@include add_count.lua
--@include dep_settle.lua
--@include outcome.lua
--@include stored_default.lua
local CASCADE_MAX, OUTBOX_WAKE_TOKENS = 1000, 16
local function dep_notify(base, items, now)
  local settles, woken, head = 0, false, 1
  while items[head] do
    local item = items[head]
    head = head + 1
    local id = item[1]
    local queue = string.match(id, '^([^:]+):')
    local entries, linked = {}, false
    for entry in string.gmatch(item[2], '%S+') do
      if entry == '+' then
        linked = true
      else
        entries[#entries + 1] = entry
      end
    end
    if linked then
      local nkey = base .. 'next:' .. id
      local later = redis.pcall('LRANGE', nkey, 0, -1)
      if not later.err then
        for _, entry in ipairs(later) do
          entries[#entries + 1] = entry
        end
      end
      redis.call('DEL', nkey)
    end
    for _, entry in ipairs(entries) do
      local copy, path, k, did = string.match(entry, '^([pc])([io])(%d+):(.+)$')
      if did then
        local body = ''
        if copy == 'p' then
          body = item[7]
        end
        local value = outcome(item[3], item[4], item[5], item[6], body)
        if path == 'i' and settles < CASCADE_MAX and string.match(did, '^([^:]+):') == queue then
          settles = settles + 1
          local _, ended = dep_settle(base, did, k, value, now)
          if ended and ended[2] then
            items[#items + 1] = ended
          end
        else
          redis.call('XADD', base .. 'outbox', '*', 'd', did, 'x', k, 'v', value)
          if not woken then
            woken = true
            local wake = base .. 'wake'
            if redis.call('LLEN', wake) < OUTBOX_WAKE_TOKENS then
              redis.call('RPUSH', wake, '1')
            end
          end
        end
      elseif entry == 'w' then
        local workflow = string.match(id, '^(.+)%.f$')
        local record = workflow and base .. 'wf:' .. workflow
        local st = record and redis.pcall('HGET', record, 'st')
        if type(st) == 'string' and st ~= 'succeeded' and st ~= 'failed' and st ~= 'cancelled' then
          redis.call('HSET', record, 'st', 'failed', 'lost', 1, 't1', now)
          add_count(base .. 'stats', 'wffailed', 1)
          local ttl = tonumber(stored_default('ttl', redis.call('HGET', base .. 'job:' .. id,
                                                                'ttl'))) or 0
          if ttl > 0 then
            redis.call('EXPIRE', record, ttl)
          else
            redis.call('DEL', record)
          end
        end
      end
    end
  end
end
