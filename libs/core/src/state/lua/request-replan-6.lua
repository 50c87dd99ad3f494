--[[
  Hands a running task run back to the plan loop after a node failure that calls for it.
  ARGV[1] failure JSON, ARGV[2] generation of the failing node
  Returns 1 when the replan is requested (now or before), 0 when it cannot be: the run is not a
  running task run of that generation, or its replans are used up.
]]
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
if tonumber(ARGV[2]) ~= generation() then return 0 end
if not redis.call('HGET', KEYS[1], 'task') or redis.call('HGET', KEYS[1], 'mode') == 'loop' then return 0 end
if redis.call('HEXISTS', KEYS[1], 'replan') == 1 then return 1 end
local allowed = tonumber(redis.call('HGET', KEYS[1], 'maxReplans') or '0')
if tonumber(redis.call('HGET', KEYS[1], 'replans') or '0') >= allowed then return 0 end
redis.call('HSET', KEYS[1], 'replan', ARGV[1])
emit('replan.requested', '', ARGV[1])
return 1
