--[[
  Stores a new run, queued — or answers the run that has this id already. The create is
  idempotent on the run id: a run whose id derives from its tenant and Idempotency-Key is created
  by whichever request gets here first, and every other request (a retry, a concurrent duplicate,
  a command ioredis re-sent after a reconnect) finds it and changes nothing. No claim key is
  written beside the run, so no crash can leave a claim without its run.
  ARGV[1] meta fields (JSON object of strings), ARGV[2] readiness counters (JSON object of numbers),
  ARGV[3] safety TTL in seconds (until the run settles and gets its retention TTL)
  Returns { 1 } when this call created the run, or { 0, status, createdAt } of the existing run.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  local existing = redis.call('HMGET', KEYS[1], 'status', 'createdAt')
  return { 0, existing[1] or false, existing[2] or false }
end
local meta = cjson.decode(ARGV[1])
for k, v in pairs(meta) do redis.call('HSET', KEYS[1], k, v) end
local pending = cjson.decode(ARGV[2])
for k, v in pairs(pending) do redis.call('HSET', KEYS[2], k, v) end
-- Placeholders so every key of the run exists now and carries the safety TTL below.
redis.call('HSET', KEYS[4], '_', '{}')
redis.call('HSET', KEYS[6], 'createdAt', meta.createdAt or '')
emit('run.queued', '', '')
for i = 1, 6 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[3])) end
return { 1 }
