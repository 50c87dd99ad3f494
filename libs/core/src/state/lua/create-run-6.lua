--[[
  Stores a new run, queued.
  ARGV[1] meta fields (JSON object of strings), ARGV[2] readiness counters (JSON object of numbers),
  ARGV[3] safety TTL in seconds (until the run settles and gets its retention TTL)
  Returns 1, or 0 when a run with this id exists.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local meta = cjson.decode(ARGV[1])
for k, v in pairs(meta) do redis.call('HSET', KEYS[1], k, v) end
local pending = cjson.decode(ARGV[2])
for k, v in pairs(pending) do redis.call('HSET', KEYS[2], k, v) end
-- Placeholders so every key of the run exists now and carries the safety TTL below.
redis.call('HSET', KEYS[4], '_', '{}')
redis.call('HSET', KEYS[6], 'createdAt', meta.createdAt or '')
emit('run.queued', '', '')
for i = 1, 6 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[3])) end
return 1
