--[[
  Where one wait of a node stands — a wait node's signal, the approval of a held tool call, or a
  budget decision of a model call paused over the run's money budget: the signal's payload if it
  was delivered, its deadline (set once per wait key), its signal name, and who decided it. A
  node's first call begins its wait: it registers the node as awaiting the name (which is what
  lets `signal-6.lua` accept it), appends the node's wait record and a `signal.awaited` event (and
  `budget.paused` for a budget decision). An approval's or a budget decision's name ends in a
  nonce, drawn once per wait key and kept, so a redelivered or re-entering job waits for the same
  name, and no one can post the decision before it is asked. Several nodes may share a wait key (a
  budget decision: one per generation and budget): each begins its own wait under the one name.
  ARGV[1] node id
  ARGV[2] wait key: names the deadline (`waitUntil:<key>`) and an approval's nonce (`hold:<key>`);
          a wait node's is its node id
  ARGV[3] signal name; for an approval, its prefix, followed by the nonce
  ARGV[4] nonce to keep on the first call ('' for a wait node: the name is the signal)
  ARGV[5] deadline to set if none (epoch ms), ARGV[6] the same as an ISO string
  ARGV[7] live state JSON (the script adds `signal`) while the signal has not arrived
  ARGV[8] wait record JSON without `signal`, `until` and `generation` ({since, approval?, budget?})
  Returns { payload JSON | false, deadline (epoch ms), signal name, decision JSON | false };
  { false, 0, '', false }, writing nothing, for an unknown run.
]]
-- A run that expired or was deleted: no signal will come, the wait is over.
if redis.call('EXISTS', KEYS[1]) == 0 then return { false, 0, '', false } end
local node, key = ARGV[1], ARGV[2]
local name = ARGV[3]
if ARGV[4] ~= '' then
  redis.call('HSETNX', KEYS[6], 'hold:' .. key, ARGV[4])
  name = name .. redis.call('HGET', KEYS[6], 'hold:' .. key)
end
local first = redis.call('HSETNX', KEYS[6], 'waitUntil:' .. key, ARGV[5]) == 1
local deadline = tonumber(redis.call('HGET', KEYS[6], 'waitUntil:' .. key))

-- The wait's deadline as the caller wrote it, or, under a key another node set, as that one's.
local untilIso = deadline == tonumber(ARGV[5]) and ARGV[6] or isoOf(deadline)
local payload = redis.call('HGET', KEYS[6], 'signal:' .. name)
local decision = redis.call('HGET', KEYS[6], 'signalBy:' .. name)
local awaiting = cjson.decode(redis.call('HGET', KEYS[6], 'awaiting:' .. name) or '{}')
-- The key's first call begins a wait; so does another node's first call under a shared key.
if first or awaiting[node] == nil then
  local gen = generation()
  awaiting[node] = { u = deadline, g = gen }
  redis.call('HSET', KEYS[6], 'awaiting:' .. name, cjson.encode(awaiting))
  local record = cjson.decode(ARGV[8])
  record.signal = name
  record['until'] = untilIso
  record.generation = gen
  if decision then record.decidedBy = cjson.decode(decision) end
  local records = cjson.decode(redis.call('HGET', KEYS[6], 'waits:' .. node) or '[]')
  records[#records + 1] = record
  redis.call('HSET', KEYS[6], 'waits:' .. node, cjson.encode(records))
  local event = { signal = name }
  event['until'] = untilIso
  if record.approval then event.approval = record.approval end
  if record.budget then event.budget = record.budget end
  emit('signal.awaited', node, cjson.encode(event))
  if record.budget and not payload then
    local paused = { budget = 'costUsd', costUsd = record.budget.costUsd, spentUsd = record.budget.spentUsd,
      signal = name }
    paused['until'] = untilIso
    emit('budget.paused', node, cjson.encode(paused))
  end
end
if not payload then
  local live = cjson.decode(ARGV[7])
  live.signal = name
  redis.call('HSET', KEYS[4], node, cjson.encode(live))
end
return { payload or false, deadline, name, decision or false }
