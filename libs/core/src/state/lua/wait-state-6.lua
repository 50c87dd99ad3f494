--[[
  Where a wait node stands: the signal's payload if it arrived, and its deadline (set once).
  ARGV[1] node id, ARGV[2] signal name, ARGV[3] deadline to set if none (epoch ms), ARGV[4] live JSON
  Returns { payload JSON | false, deadline (epoch ms) }; { false, 0 }, writing nothing, for an
  unknown run.
]]
-- A run that expired or was deleted: no signal will come, the wait is over.
if redis.call('EXISTS', KEYS[1]) == 0 then return { false, 0 } end
redis.call('HSETNX', KEYS[6], 'waitUntil:' .. ARGV[1], ARGV[3])
local payload = redis.call('HGET', KEYS[6], 'signal:' .. ARGV[2])
if not payload then redis.call('HSET', KEYS[4], ARGV[1], ARGV[4]) end
return { payload or false, tonumber(redis.call('HGET', KEYS[6], 'waitUntil:' .. ARGV[1])) }
