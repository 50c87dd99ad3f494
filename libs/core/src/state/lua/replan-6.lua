--[[
  Installs a new plan for a task run whose replan was requested: snapshots of nodes the new plan
  does not reuse are dropped, counters rebuilt, usage restarts for the new plan, the generation
  moves on (stale node jobs are then discarded) and the run is queued for its new root job; the
  node count (`nodeCount`) is the new plan's.
  ARGV[1] graph JSON, ARGV[2] executable plan JSON, ARGV[3] readiness counters (JSON object),
  ARGV[4] planning record JSON, ARGV[5] planner usage (JSON object), ARGV[6] plan event data JSON,
  ARGV[7] generation being replaced, ARGV[8..] node ids whose snapshots to drop
  Returns the new generation, or 0 when the run is not running (it ended meanwhile) or not waiting
  for a replan of that generation.
]]
-- A run that ended meanwhile (cancelled, timed out) stays ended: its decision stands.
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
if redis.call('HEXISTS', KEYS[1], 'replan') == 0 then return 0 end
if tonumber(ARGV[7]) ~= generation() then return 0 end
for i = 8, #ARGV do
  forgetNode(ARGV[i])
end
redis.call('HDEL', KEYS[6], 'usage:toolCalls', 'usage:toolTimeMs', 'usage:promptTokens', 'usage:completionTokens', 'usage:modelCalls')
charge(ARGV[5])
redis.call('DEL', KEYS[2], KEYS[4])
redis.call('HSET', KEYS[4], '_', '{}')
for k, v in pairs(cjson.decode(ARGV[3])) do redis.call('HSET', KEYS[2], k, v) end
redis.call('HSET', KEYS[1], 'graph', ARGV[1], 'plan', ARGV[2], 'planning', ARGV[4])
redis.call('HSET', KEYS[1], 'nodeCount', cjson.decode(ARGV[6]).nodes)
setStatus('queued')
redis.call('HDEL', KEYS[1], 'replan')
redis.call('HINCRBY', KEYS[1], 'replans', 1)
local gen = redis.call('HINCRBY', KEYS[1], 'generation', 1)
emit('plan', '', ARGV[6])
return gen
