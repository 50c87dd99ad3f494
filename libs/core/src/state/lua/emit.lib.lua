--[[
  Shared by every run script (prepended when the scripts load). The run's keys are always
  KEYS[1] meta, KEYS[2] pending, KEYS[3] nodes, KEYS[4] live, KEYS[5] events, KEYS[6] aux.
  emit(type, nodeId, dataJson) appends an event to the run's stream with the run's next sequence
  number as its id (0-<seq>), so a reader resumes from any seq with XRANGE/XREAD.
]]
local function emit(etype, node, data)
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  local t = redis.call('TIME')
  local ts = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('XADD', KEYS[5], '0-' .. seq, 'type', etype, 'ts', ts, 'node', node or '', 'data', data or '')
  return seq
end

local function generation()
  return tonumber(redis.call('HGET', KEYS[1], 'generation') or '0')
end

-- Adds a usage charge (JSON object of integers) to the run's usage counters.
local function charge(json)
  for k, v in pairs(cjson.decode(json)) do
    if v ~= 0 then redis.call('HINCRBY', KEYS[6], 'usage:' .. k, v) end
  end
end

-- Model tokens used so far (prompt + completion).
local function tokens()
  return tonumber(redis.call('HGET', KEYS[6], 'usage:promptTokens') or '0')
    + tonumber(redis.call('HGET', KEYS[6], 'usage:completionTokens') or '0')
end

-- Drops what a node's earlier executions left: snapshot and per-node bookkeeping (resume, replan).
local function forgetNode(id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[6], 'execs:' .. id, 'attempts:' .. id, 'progress:' .. id, 'iterations:' .. id, 'waitUntil:' .. id)
end
