-- wf_nodes: create one batch of the nodes of a workflow, or of jobs that wait for others
-- (using(depends_on=...)), on one queue.
--
-- KEYS[1] queue base (derives job:<id> for each node, group:<prio>:<group>, ring:<prio>,
--         parked:<group>, groupfull, paused, as include/push_queued_many.lua)
-- KEYS[2] prios zset   KEYS[3] delayed zset   KEYS[4] stats hash   KEYS[5] notify list
-- KEYS[6] wake list    KEYS[7] waiting zset
-- ARGV[1] mode: 'live' (the sources, nodes without an input, are queued or scheduled now)
--         or 'gated' (every source waits for its gate, input 0, opened by dep_apply.lua)
-- ARGV[2] dependency deadline: ms from now (-1: none, scored '+inf' in `waiting`)
-- ARGV[3] gate grace in ms (-1: none): a gated source is scored now + this in `waiting`
--         until its gate opens (a creation whose client died is then swept), else at
--         its dependency deadline
-- ARGV[4] S, the number of shared pairs that follow: pairs every node of the batch has
--         (read before each node's own pairs; never the payload 'p')
-- then per node: job id, F, then F pairs of its own.
-- A pair is a job-hash field copied into the record ('n', 'p', 'max', 'tmo', 'ttl', 'exp_in',
-- 'sens', 'wf', 'nx', 'dn', 'di', 'dp', 'dr', 'rd'; include/create_job.lua) or one of these
-- instructions, read here (an absent one has its default): 'prio' the priority (integer
-- -100..100; 0), 'group' ('': the default group), 'delay' in ms (>= 0; 0), 'runat' in ms
-- since the epoch (-1: none), 'src' '1' for a source (else not a source).
--
-- Each node is created as include/create_job.lua creates a job (no unique key: nodes have
-- none), with one Redis TIME for the batch; a node already there is left as it is
-- ('exists': a resent batch is a no-op). A node with inputs ('dn' > 0), and in mode
-- 'gated' a source, is written 'waiting' with 'dw' (inputs missing) = 'dn' (+ 1 for the
-- gate, whose dependency deadline waits in 'gt' meanwhile) and joins `waiting`; its
-- delay is its 'rd' (counted from its release), its run-at is kept in 'due'. The other
-- nodes are queued or scheduled as enqueue_batch.lua does (one command of each kind per
-- priority and group, or per run-at). Every created node counts in stats 'enqueued'.
-- Returns {index, outcome, ...} for each node not created (index 1-based, outcome
-- 'exists'); {} when every node was created.
-- Derived keys: base .. 'job:' .. id, base .. 'unique:' (never written), and those of
-- include/push_queued_many.lua and include/add_delayed_many.lua.

--@include add_count.lua
--@include add_delayed_many.lua
--@include create_job.lua
--@include now_ms.lua
--@include push_queued_many.lua
--@include schedule.lua

local base, prios, delayed, stats, notify, wake, waiting =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local mode, offset, grace, nshared = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
                                     tonumber(ARGV[4])
if mode ~= 'live' and mode ~= 'gated' then
  return redis.error_reply('ERR rqueue wf_nodes: bad mode ' .. tostring(mode))
end
if not offset or (offset < 0 and offset ~= -1) or not grace or (grace < 0 and grace ~= -1) then
  return redis.error_reply('ERR rqueue wf_nodes: bad deadline or grace')
end
if not nshared or nshared < 0 or nshared ~= math.floor(nshared) or 4 + 2 * nshared > #ARGV then
  return redis.error_reply('ERR rqueue wf_nodes: bad shared field count ' .. tostring(ARGV[4]))
end
local nargv = #ARGV
local function bad_option(name, value)  -- the problem with an instruction's value, or nil
  if name == 'prio' then
    local level = tonumber(value)
    if not level or level ~= math.floor(level) or level < -100 or level > 100 then
      return 'bad priority ' .. tostring(value)
    end
  elseif (name == 'delay' and not (tonumber(value) and tonumber(value) >= 0))
      or (name == 'runat' and not tonumber(value)) then
    return 'bad delay/run_at ' .. tostring(value)
  end
  return nil
end

-- The shared pairs, read once.
local sfields, sprio, sgroup, sdelay, srun_at, sinputs, ssource = {}, '0', '', 0, -1, 0, false
for j = 5, 4 + 2 * nshared, 2 do
  local name, value = ARGV[j], ARGV[j + 1]
  local problem = bad_option(name, value)
  if problem then
    return redis.error_reply('ERR rqueue wf_nodes: ' .. problem)
  end
  if name == 'src' then
    ssource = value == '1'
  elseif name == 'prio' then
    sprio = tostring(tonumber(value))
  elseif name == 'group' then
    sgroup = value
  elseif name == 'delay' then
    sdelay = tonumber(value)
  elseif name == 'runat' then
    srun_at = tonumber(value)
  else
    sfields[#sfields + 1], sfields[#sfields + 2] = name, value
    if name == 'dn' then
      sinputs = tonumber(value) or 0
    end
  end
end
local nsf = #sfields

-- Check every node before writing any (only instructions have values to check).
local starts = {}
local a = 5 + 2 * nshared
while a <= nargv do
  local count = tonumber(ARGV[a + 1])
  if not count or count < 0 or count ~= math.floor(count) or a + 1 + 2 * count > nargv then
    return redis.error_reply('ERR rqueue wf_nodes: bad field count ' .. tostring(ARGV[a + 1]))
  end
  for j = a + 2, a + 1 + 2 * count, 2 do
    local name = ARGV[j]
    if name == 'prio' or name == 'delay' or name == 'runat' then
      local problem = bad_option(name, ARGV[j + 1])
      if problem then
        return redis.error_reply('ERR rqueue wf_nodes: ' .. problem)
      end
    end
  end
  starts[#starts + 1] = a
  a = a + 2 + 2 * count
end

local now = now_ms()
local deadline = '+inf'
if offset >= 0 then
  deadline = now + offset
end
local reply, created, parked, queued, delayed_at = {}, 0, {}, {}, {}
local queued_order, delayed_order = {}, {}
local last_prio, last_group, last_ids = nil, nil, nil
for i, a in ipairs(starts) do
  local id, fields, n = ARGV[a], {}, nsf
  for j = 1, nsf do
    fields[j] = sfields[j]
  end
  local prio, group, delay, run_at, inputs, source = sprio, sgroup, sdelay, srun_at, sinputs,
                                                     ssource
  for j = a + 2, a + 1 + 2 * tonumber(ARGV[a + 1]), 2 do
    local name, value = ARGV[j], ARGV[j + 1]
    if name == 'src' then
      source = value == '1'
    elseif name == 'prio' then
      prio = tostring(tonumber(value))
    elseif name == 'group' then
      group = value
    elseif name == 'delay' then
      delay = tonumber(value)
    elseif name == 'runat' then
      run_at = tonumber(value)
    else
      fields[n + 1], fields[n + 2] = name, value
      n = n + 2
      if name == 'dn' then
        inputs = tonumber(value) or 0
      end
    end
  end
  local gated = mode == 'gated' and source
  local missing = inputs
  if gated then
    missing = missing + 1
  end
  local due, state
  if missing > 0 then
    state, due = 'waiting', now
    if run_at >= 0 then
      due = run_at
    end
    fields[n + 1], fields[n + 2] = 'dw', missing
    n = n + 2
    if gated then
      fields[n + 1], fields[n + 2] = 'gt', deadline
      n = n + 2
    end
  else
    due, state = schedule(now, delay, run_at)
  end
  local refused = create_job(base, base .. 'job:' .. id, base .. 'unique:', id, '', 0, now, due,
                             state, prio, group, fields, 1, n)
  if refused then
    reply[#reply + 1], reply[#reply + 2] = i, refused[1]
  else
    created = created + 1
    if state == 'waiting' then
      local score = deadline
      if gated and grace >= 0 then
        score = now + grace
      end
      parked[#parked + 1], parked[#parked + 2] = score, id
    elseif state == 'scheduled' then
      if not delayed_at[due] then
        delayed_at[due] = {}
        delayed_order[#delayed_order + 1] = due
      end
      table.insert(delayed_at[due], id)
    else
      if prio ~= last_prio or group ~= last_group then  -- most batches have one of each
        last_prio, last_group = prio, group
        local where = prio .. ' ' .. group
        last_ids = queued[where]
        if not last_ids then
          last_ids = {prio = prio, group = group}
          queued[where] = last_ids
          queued_order[#queued_order + 1] = where
        end
      end
      last_ids[#last_ids + 1] = id
    end
  end
end
for i = 1, #parked, 2000 do  -- unpack() is bounded by Lua's C stack
  redis.call('ZADD', waiting, unpack(parked, i, math.min(i + 1999, #parked)))
end
for _, due in ipairs(delayed_order) do
  add_delayed_many(delayed, wake, delayed_at[due], due)
end
for _, where in ipairs(queued_order) do
  local ids = queued[where]
  push_queued_many(base, prios, stats, notify, ids, ids.prio, ids.group)
end
if created > 0 then
  add_count(stats, 'enqueued', created)
end
return reply
