--[[
  Reads what a node needs before it runs and marks it running, in one round trip.
  KEYS[1] meta, KEYS[2] pending, KEYS[3] nodes, KEYS[4] live
  ARGV[1] node id, ARGV[2] live JSON for a running node, ARGV[3..] ids whose snapshots to read
  Returns { run status or false, own snapshot or false, snapshot of each ARGV[3..] or false }.
  The node is marked running only when the run is running and it has no snapshot yet.
]]
local status = redis.call('HGET', KEYS[1], 'status')
local own = redis.call('HGET', KEYS[3], ARGV[1])
local result = { status, own }
for i = 3, #ARGV do
  result[#result + 1] = redis.call('HGET', KEYS[3], ARGV[i])
end
if status == 'running' and not own then
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
end
return result
