--[[
  Reads what a node needs before it runs and marks it running, in one round trip.
  ARGV[1] node id, ARGV[2] generation of the node job, ARGV[3] live JSON for a running node,
  ARGV[4] '1' to count this as an execution (loop suspicion), ARGV[5] '1' to charge one tool call,
  ARGV[6..] ids whose snapshots to read
  Returns { run status | 'stale' | false, own snapshot | false, executions, tool calls so far,
  tool time so far (ms), attempts JSON | false, progress JSON | false, deadline (epoch ms) | false,
  budget JSON | false, tokens so far, cost so far (nano-dollars), snapshot of each ARGV[6..] | false ... }.
  Counting and charging happen only when the run is running and the node has no snapshot.
  Each of the run's hashes is read with one HMGET: a node's start costs a few commands, not one per
  field. It writes only live, aux and events, which exist while the run runs.
  'stale' also answers a node deferred to the replan its session's environment change asked for.
]]
ttlKeys = {}
local id = ARGV[1]
local meta = redis.call('HMGET', KEYS[1], 'generation', 'status', 'deadlineAt', 'budget', 'eventsMax',
  'replan', 'envVersion', 'planEnvVersion')
if tonumber(ARGV[2]) < tonumber(meta[1] or '0') then return { 'stale' } end
local status = meta[2]
eventsMax = tonumber(meta[5] or '10000')
local aux = redis.call('HMGET', KEYS[6], 'execs:' .. id, 'usage:toolCalls', 'usage:toolTimeMs',
  'attempts:' .. id, 'progress:' .. id, 'usage:promptTokens', 'usage:completionTokens', 'usage:costNanoUsd')
-- The node's own snapshot, then those of the nodes it reads.
local fields = { id }
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
local snapshots = hmgetList(KEYS[3], fields)
local own = snapshots[1]
-- A node of a plan made before its session's environment moved does not start while the run waits
-- to be replanned for it: the new plan runs it (or does without it). One already started (a retry,
-- a parked node coming back) goes on; its result may be reused by the new plan.
if status == 'running' and meta[6] and not own then
  local seen = tonumber(meta[7] or '0')
  local planned = tonumber(meta[8] or '0')
  local live = redis.call('HGET', KEYS[4], id)
  if seen > planned and (not live or string.find(live, '"status":"queued"', 1, true)) then
    emit('node.deferred', id, cjson.encode({
      reason = 'environment_changed', planEnvironmentVersion = planned, environmentVersion = seen,
    }))
    return { 'stale' }
  end
end
local execs = tonumber(aux[1] or '0')
local calls = tonumber(aux[2] or '0')
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
  tonumber(aux[3] or '0'),
  aux[4] or false,
  aux[5] or false,
  meta[3] or false,
  meta[4] or false,
  tonumber(aux[6] or '0') + tonumber(aux[7] or '0'),
  tonumber(aux[8] or '0'),
}
for i = 2, #fields do
  result[#result + 1] = snapshots[i] or false
end
return result
