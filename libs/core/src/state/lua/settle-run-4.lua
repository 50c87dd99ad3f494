--[[
  Closes a run once no node can run any more: nodes without a snapshot get the given one
  (skipped or cancelled), the output is stored, finishedAt is set, every key of the run gets
  its retention TTL, and the settled channel is told.
  KEYS[1] meta, KEYS[2] pending, KEYS[3] nodes, KEYS[4] live
  ARGV[1] finishedAt (ISO), ARGV[2] output JSON or '', ARGV[3] ttl seconds, ARGV[4] settled channel,
  ARGV[5] run id, then pairs: node id, snapshot JSON for nodes that may lack one
  Returns 1 when this call settled the run, 0 when it was settled before.
]]
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 then return 0 end
for i = 6, #ARGV, 2 do
  redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1])
end
redis.call('DEL', KEYS[4])
redis.call('HSET', KEYS[1], 'finishedAt', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'output', ARGV[2]) end
local ttl = tonumber(ARGV[3])
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ttl) end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
