--[[
  Delivers a named signal to a run, only if something may take it: a wait of the run's current
  generation that has begun and is not over (a wait node's signal, a held tool call's approval),
  or a node of the plan that declares the name with `acceptEarly` and has not run yet (fields only
  a wait node has: read as fields, not by the node's kind). The check and the delivery are one
  step, so nothing can slip a signal in before its wait exists.
  The first delivery of a name wins; each accepted signal counts against the run's cap. The
  decision (who, when) goes into the signal's record, each waiting node's wait record and the
  `signal.received` event. A budget decision that raises the run's money budget raises it in the
  same step (and appends `budget.raised`), so the paused calls find the new budget when they wake.
  ARGV[1] signal name, ARGV[2] payload JSON, ARGV[3] decision JSON {keyId, tenant, at},
  ARGV[4] most signals the run accepts, ARGV[5] now (epoch ms),
  ARGV[6] '' or the budget a budget decision raises to, JSON {costUsd} (already held to the ceiling)
  Returns 'delivered'; 'duplicate' (delivered before); or, writing nothing, 'unknown_run',
  'run_finished' (its outcome is decided), 'not_awaited', 'too_many', 'not_raised' (the raise is not
  above the run's budget).
]]
local name = ARGV[1]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'unknown_run' end
if status ~= 'queued' and status ~= 'running' then return 'run_finished' end
if redis.call('HEXISTS', KEYS[6], 'signal:' .. name) == 1 then return 'duplicate' end

-- Waits that began for this name: node id → {u = deadline (epoch ms), g = generation}.
local waiting = {}
local now = tonumber(ARGV[5])
local awaiting = redis.call('HGET', KEYS[6], 'awaiting:' .. name)
if awaiting and status == 'running' then
  local gen = generation()
  for node, w in pairs(cjson.decode(awaiting)) do
    if w.g == gen and w.u > now and redis.call('HEXISTS', KEYS[3], node) == 0 then
      waiting[#waiting + 1] = node
    end
  end
end

local function declaredEarly()
  local plan = redis.call('HGET', KEYS[1], 'plan')
  if not plan then return false end
  for _, n in ipairs(cjson.decode(plan).nodes or {}) do
    if n.signal == name and n.acceptEarly == true
      and redis.call('HEXISTS', KEYS[3], n.id) == 0 then
      return true
    end
  end
  return false
end

if #waiting == 0 and not declaredEarly() then return 'not_awaited' end
if tonumber(redis.call('HGET', KEYS[6], 'signals') or '0') >= tonumber(ARGV[4]) then return 'too_many' end

local budget, raisedFrom
if ARGV[6] ~= '' then
  local raise = cjson.decode(ARGV[6])
  budget = cjson.decode(redis.call('HGET', KEYS[1], 'budget') or '{}')
  raisedFrom = budget.costUsd
  -- Compared in nano-dollars, as the harness compares spending.
  if raisedFrom and math.floor(raise.costUsd * 1e9 + 0.5) <= math.floor(raisedFrom * 1e9 + 0.5) then
    return 'not_raised'
  end
  budget.costUsd = raise.costUsd
  redis.call('HSET', KEYS[1], 'budget', cjson.encode(budget))
end

redis.call('HSET', KEYS[6], 'signal:' .. name, ARGV[2], 'signalBy:' .. name, ARGV[3])
redis.call('HINCRBY', KEYS[6], 'signals', 1)
local decision = cjson.decode(ARGV[3])
for _, node in ipairs(waiting) do
  local field = 'waits:' .. node
  local raw = redis.call('HGET', KEYS[6], field)
  if raw then
    local records = cjson.decode(raw)
    for i = #records, 1, -1 do
      if records[i].signal == name then
        records[i].decidedBy = decision
        break
      end
    end
    redis.call('HSET', KEYS[6], field, cjson.encode(records))
  end
end
emit('signal.received', '', '{"name":' .. cjson.encode(name) .. ',"payload":' .. ARGV[2]
  .. ',"decidedBy":' .. ARGV[3] .. '}')
if budget then
  emit('budget.raised', '', cjson.encode({ budget = 'costUsd', from = raisedFrom or cjson.null,
    to = budget.costUsd, signal = name, decidedBy = decision }))
end
return 'delivered'
