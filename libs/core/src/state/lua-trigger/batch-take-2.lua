--[[
  One flush of a batch: takes its oldest events, at most maxSize, into the flush's own key, once.
  A retried flush (its worker stopped before the run was made) finds what it took the first time,
  so its run is made from the same events; `[]` once the run exists.
  KEYS[1] the batch's sorted set   KEYS[2] the flush's taken key
  ARGV[1] maxSize   ARGV[2] the taken key's TTL (ms)
  Returns the taken events as a JSON array.
]]
local taken = redis.call('GET', KEYS[2])
if taken then return taken end
local members = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #members > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #members - 1) end
taken = '[' .. table.concat(members, ',') .. ']'
redis.call('SET', KEYS[2], taken, 'PX', ARGV[2])
return taken
