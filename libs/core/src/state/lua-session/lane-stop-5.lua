--[[
  /stop: empties the lane. KEYS: meta, queue, buffer, transcript, env.
  Then the idle TTL and the transcript cap (see session.lib.lua).
  Returns { running run id or '', queued run ids... } for the caller to cancel.
]]
local running = redis.call('HGET', KEYS[1], 'running') or ''
local queued = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'running', '')
local result = { running }
for _, id in ipairs(queued) do
  if id ~= 'collect' then result[#result + 1] = id end
end
return result
