--[[
  Delivers a named signal to a run; the first delivery of a name wins.
  ARGV[1] signal name, ARGV[2] payload JSON, ARGV[3] event data JSON
  Returns 1 when delivered now, 0 when the name was delivered before, -1 for an unknown run.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local set = redis.call('HSETNX', KEYS[6], 'signal:' .. ARGV[1], ARGV[2])
if set == 1 then emit('signal.received', '', ARGV[3]) end
return set
