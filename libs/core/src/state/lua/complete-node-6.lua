--[[
  Records a node's snapshot (once, counted under its status) and releases the dependents it was the
  last to wait for.
  ARGV[1] node id, ARGV[2] snapshot JSON, ARGV[3] event type, ARGV[4] event data JSON,
  ARGV[5] '1' to release dependents, ARGV[6] live JSON for a queued node, ARGV[7] usage to charge
  (JSON object of integers, e.g. {"toolTimeMs":12,"promptTokens":30}), ARGV[8..] children
  Returns { written (1 = this call wrote the snapshot, 0 = it existed), run status, generation,
  ready child ids... }; { 0, false, 0 }, writing nothing, for an unknown run.
  A child is ready when its counter is 0 and it has no snapshot. On a redelivery (written = 0) the
  counters are not decremented again, but ready children are still returned so a crash between
  this script and the enqueue cannot strand them; their job ids are deterministic, so adding them
  twice is harmless.
]]
local id = ARGV[1]
local status = redis.call('HGET', KEYS[1], 'status')
-- A run that expired or was deleted gets no keys back from a late node.
if not status then return { 0, false, 0 } end
local written = redis.call('HSETNX', KEYS[3], id, ARGV[2])
if written == 1 then
  redis.call('HDEL', KEYS[4], id)
  countNode(snapshotStatus(ARGV[2]), 1)
  charge(ARGV[7])
  emit(ARGV[3], id, ARGV[4])
  -- A tool node's result is also a tool event.
  if string.find(ARGV[4], '"tool":', 1, true) then emit('tool.result', id, ARGV[4]) end
end
local result = { written, status or false, generation() }
-- Nothing new starts while the run waits to be replanned.
if ARGV[5] ~= '1' or redis.call('HEXISTS', KEYS[1], 'replan') == 1 then return result end
for i = 8, #ARGV do
  local child = ARGV[i]
  local left
  if written == 1 then
    left = redis.call('HINCRBY', KEYS[2], child, -1)
  else
    left = tonumber(redis.call('HGET', KEYS[2], child) or '-1')
  end
  if left == 0 and redis.call('HEXISTS', KEYS[3], child) == 0 then
    result[#result + 1] = child
    if status == 'running' and written == 1 then
      redis.call('HSET', KEYS[4], child, ARGV[6])
      emit('node.queued', child, '')
    end
  end
end
return result
