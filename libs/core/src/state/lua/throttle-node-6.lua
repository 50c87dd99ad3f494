--[[
  Flow control held a node's call back, or let it go after holding it.
  ARGV[1] node id, ARGV[2] live JSON ('' leaves the live state), ARGV[3] data of a `node.throttled`
  event ('' for none), ARGV[4] ms the call waited (added to the node's throttled time; 0 for none).
  Only while the run is running and the node has no snapshot. Returns 1 when recorded.
]]
local id = ARGV[1]
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
if redis.call('HEXISTS', KEYS[3], id) == 1 then return 0 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[4], id, ARGV[2]) end
if ARGV[3] ~= '' then emit('node.throttled', id, ARGV[3]) end
local ms = tonumber(ARGV[4])
if ms > 0 then redis.call('HINCRBY', KEYS[6], 'throttled:' .. id, ms) end
return 1
