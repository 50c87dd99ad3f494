--[[
  Moves a run from queued to running and marks its source nodes queued.
  KEYS[1] meta, KEYS[2] pending, KEYS[3] nodes, KEYS[4] live
  ARGV[1] startedAt (ISO), ARGV[2] live JSON for a queued node, ARGV[3..] source node ids
  Returns the run status after the call ('running' when it was started now or before), or false
  when the run does not exist.
]]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return false end
if status ~= 'queued' then return status end
redis.call('HSET', KEYS[1], 'status', 'running', 'startedAt', ARGV[1])
for i = 3, #ARGV do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[2])
end
return 'running'
