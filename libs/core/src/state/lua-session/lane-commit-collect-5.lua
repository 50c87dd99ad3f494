--[[
  Hands the lane to the run made of the first `count` collected messages. KEYS: meta, queue, buffer,
  transcript, env. ARGV[1] run id, ARGV[2] count
  Then the idle TTL and the transcript cap (see session.lib.lua).
  Returns 1, or 0 when the lane was not waiting for its collected run.
]]
if redis.call('HGET', KEYS[1], 'running') ~= 'collect' then return 0 end
redis.call('LTRIM', KEYS[3], tonumber(ARGV[2]), -1)
if redis.call('LLEN', KEYS[3]) == 0 then redis.call('LREM', KEYS[2], 1, 'collect') end
redis.call('HSET', KEYS[1], 'running', ARGV[1])
return 1
