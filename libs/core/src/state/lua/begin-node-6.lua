--[[
  Reads what a node needs before it runs and marks it running, in one round trip.
  ARGV[1] node id, ARGV[2] generation of the node job, ARGV[3] live JSON for a running node,
  ARGV[4] '1' to count this as an execution (loop suspicion), ARGV[5] '1' to charge one tool call,
  ARGV[6..] ids whose snapshots to read
  Returns { run status | 'stale' | false, own snapshot | false, executions, tool calls so far,
  tool time so far (ms), attempts JSON | false, progress JSON | false, deadline (epoch ms) | false,
  budget JSON | false, tokens so far, cost so far (nano-dollars), snapshot of each ARGV[6..] | false ... }.
  Counting and charging happen only when the run is running and the node has no snapshot.
  'stale' also answers a node deferred to the replan its session's environment change asked for.
]]
local id = ARGV[1]
if tonumber(ARGV[2]) < generation() then return { 'stale' } end
local status = redis.call('HGET', KEYS[1], 'status')
-- A node of a plan made before its session's environment moved does not start while the run waits
-- to be replanned for it: the new plan runs it (or does without it). One already started (a retry,
-- a parked node coming back) goes on; its result may be reused by the new plan.
if status == 'running' and redis.call('HEXISTS', KEYS[1], 'replan') == 1 then
  local seen = tonumber(redis.call('HGET', KEYS[1], 'envVersion') or '0')
  local planned = tonumber(redis.call('HGET', KEYS[1], 'planEnvVersion') or '0')
  local live = redis.call('HGET', KEYS[4], id)
  if seen > planned and redis.call('HEXISTS', KEYS[3], id) == 0
    and (not live or string.find(live, '"status":"queued"', 1, true)) then
    emit('node.deferred', id, cjson.encode({
      reason = 'environment_changed', planEnvironmentVersion = planned, environmentVersion = seen,
    }))
    return { 'stale' }
  end
end
local own = redis.call('HGET', KEYS[3], id)
local execs = tonumber(redis.call('HGET', KEYS[6], 'execs:' .. id) or '0')
local calls = tonumber(redis.call('HGET', KEYS[6], 'usage:toolCalls') or '0')
if status == 'running' and not own then
  if ARGV[4] == '1' then execs = redis.call('HINCRBY', KEYS[6], 'execs:' .. id, 1) end
  if ARGV[5] == '1' then calls = redis.call('HINCRBY', KEYS[6], 'usage:toolCalls', 1) end
  redis.call('HSET', KEYS[4], id, ARGV[3])
  if ARGV[4] == '1' then emit('node.started', id, ARGV[3]) end
  if ARGV[5] == '1' then emit('tool.start', id, '') end
end
local result = {
  status or false,
  own or false,
  execs,
  calls,
  tonumber(redis.call('HGET', KEYS[6], 'usage:toolTimeMs') or '0'),
  redis.call('HGET', KEYS[6], 'attempts:' .. id) or false,
  redis.call('HGET', KEYS[6], 'progress:' .. id) or false,
  redis.call('HGET', KEYS[1], 'deadlineAt') or false,
  redis.call('HGET', KEYS[1], 'budget') or false,
  tokens(),
  tonumber(redis.call('HGET', KEYS[6], 'usage:costNanoUsd') or '0'),
}
for i = 6, #ARGV do
  result[#result + 1] = redis.call('HGET', KEYS[3], ARGV[i]) or false
end
return result
