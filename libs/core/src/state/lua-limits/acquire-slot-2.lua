--[[
  Gives a run one of its tenant's running slots, or puts it on the tenant's waiting list.
  KEYS[1] the tenant's running runs (sorted set: run id → when it got its slot, epoch ms)
  KEYS[2] the tenant's waiting runs (sorted set: run id → when it first waited, epoch ms)
  ARGV[1] run id, ARGV[2] the tenant's cap, ARGV[3] now (epoch ms), ARGV[4] TTL of both keys (s)
  Returns 1 when the run holds a slot (now, or already: a redelivered root job, a replan), 0 when
  the tenant is at its cap and the run waits. Safe to repeat.
]]
local ttl = tonumber(ARGV[4])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ttl)
  return 1
end
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[1])
redis.call('EXPIRE', KEYS[2], ttl)
return 0
