--[[
  Records one iteration of a loop node, once: iteration n is written only when n - 1 are recorded.
  ARGV[1] node id, ARGV[2] iteration number (1-based), ARGV[3] iteration JSON,
  ARGV[4] usage to charge (JSON object of integers), ARGV[5] live JSON
  Returns { iterations recorded, tool calls so far, tool time so far (ms), tokens so far, cost so far
  (nano-dollars) }; all 0, writing nothing, for an unknown run.
]]
-- A run that expired or was deleted gets no keys back from a late node.
if redis.call('EXISTS', KEYS[1]) == 0 then return { 0, 0, 0, 0, 0 } end
local field = 'progress:' .. ARGV[1]
local countField = 'iterations:' .. ARGV[1]
local count = tonumber(redis.call('HGET', KEYS[6], countField) or '0')
if count == tonumber(ARGV[2]) - 1 then
  local list = redis.call('HGET', KEYS[6], field)
  if list then list = string.sub(list, 1, -2) .. ',' .. ARGV[3] .. ']' else list = '[' .. ARGV[3] .. ']' end
  redis.call('HSET', KEYS[6], field, list)
  count = redis.call('HINCRBY', KEYS[6], countField, 1)
  charge(ARGV[4])
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
  emit('node.iteration', ARGV[1], ARGV[3])
end
return {
  count,
  tonumber(redis.call('HGET', KEYS[6], 'usage:toolCalls') or '0'),
  tonumber(redis.call('HGET', KEYS[6], 'usage:toolTimeMs') or '0'),
  tokens(),
  tonumber(redis.call('HGET', KEYS[6], 'usage:costNanoUsd') or '0'),
}
