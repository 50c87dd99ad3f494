--[[
  Records a node's snapshot (once) and releases the dependents it was the last to wait for.
  KEYS[1] meta, KEYS[2] pending, KEYS[3] nodes, KEYS[4] live
  ARGV[1] node id, ARGV[2] snapshot JSON, ARGV[3] live JSON for a queued node, ARGV[4..] children
  Returns { written (1 = this call wrote the snapshot, 0 = it existed), run status, ready child ids... }.
  A child is ready when its counter is 0 and it has no snapshot. On a redelivery (written = 0) the
  counters are not decremented again, but ready children are still returned so a crash between
  this script and the enqueue cannot strand them; their job ids are deterministic, so adding them
  twice is harmless.
]]
local written = redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[1])
local status = redis.call('HGET', KEYS[1], 'status')
local result = { written, status or false }
for i = 4, #ARGV do
  local child = ARGV[i]
  local left
  if written == 1 then
    left = redis.call('HINCRBY', KEYS[2], child, -1)
  else
    left = tonumber(redis.call('HGET', KEYS[2], child) or '-1')
  end
  if left == 0 and redis.call('HEXISTS', KEYS[3], child) == 0 then
    result[#result + 1] = child
    if status == 'running' then
      redis.call('HSET', KEYS[4], child, ARGV[3])
    end
  end
end
return result
