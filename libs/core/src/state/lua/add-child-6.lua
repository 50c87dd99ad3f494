--[[
  Records a child run (a loop iteration's nested graph) so ending the parent ends it too.
  ARGV[1] child run id
  Returns 1 when added, 0 when it was recorded before or the run is unknown.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local list = redis.call('HGET', KEYS[6], 'children')
local quoted = '"' .. ARGV[1] .. '"'
if list and string.find(list, quoted, 1, true) then return 0 end
if list then list = string.sub(list, 1, -2) .. ',' .. quoted .. ']' else list = '[' .. quoted .. ']' end
redis.call('HSET', KEYS[6], 'children', list)
return 1
