--[[
  Records a failed attempt that will be retried.
  ARGV[1] node id, ARGV[2] attempt JSON, ARGV[3] live JSON (retrying), ARGV[4] tool time to charge (ms)
  A handed-off node whose attempt failed in the job carrying it (the live state given names that
  job, `carriedBy`, as the one stored does) keeps the node that released it (`by`) until its
  retry's own job begins it: complete-node-6.lua reads it, so that a moved sibling's redelivery
  leaves the node to that job meanwhile.
  Returns the number of recorded attempts of the node (0, writing nothing, for an unknown run).
]]
-- A run that expired or was deleted gets no keys back from a late node.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
-- Decided before anything is written. A stored state that is not a JSON object keeps nothing.
local live = ARGV[3]
if string.find(live, '"carriedBy"', 1, true) then
  local current = redis.call('HGET', KEYS[4], ARGV[1])
  local okWas, was = pcall(cjson.decode, current or '')
  local carrier = cjson.decode(live).carriedBy
  if okWas and type(was) == 'table' and type(was.by) == 'string' and carrier ~= nil
    and was.carriedBy == carrier then
    live = '{"by":' .. cjson.encode(was.by) .. ',' .. string.sub(live, 2)
  end
end
local field = 'attempts:' .. ARGV[1]
local list = redis.call('HGET', KEYS[6], field)
-- The list is JSON text; appending by string keeps every value exactly as the caller wrote it.
if list then list = string.sub(list, 1, -2) .. ',' .. ARGV[2] .. ']' else list = '[' .. ARGV[2] .. ']' end
redis.call('HSET', KEYS[6], field, list)
redis.call('HINCRBY', KEYS[6], 'usage:toolTimeMs', tonumber(ARGV[4]))
redis.call('HSET', KEYS[4], ARGV[1], live)
emit('node.retrying', ARGV[1], ARGV[2])
local _, count = string.gsub(list, '"attempt":', '')
return count
