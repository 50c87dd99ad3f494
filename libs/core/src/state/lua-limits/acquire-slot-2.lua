--[[
  Gives a member one of `cap` slots (a run one of its tenant's running slots, a node job one of its
  run's), or puts it on the waiting list.
  KEYS[1] the running members (sorted set: member → when it got its slot, epoch ms)
  KEYS[2] the waiting members (sorted set: member → when it first waited, epoch ms)
  ARGV[1] member, ARGV[2] the cap, ARGV[3] TTL of both keys (s)
  Both times are Redis's clock, so what a member asks of them later is measured on one clock,
  whichever processes asked.
  Returns { 1 } when the member holds a slot (now, or already: a redelivered root job, a replan),
  { 0, ms it has waited } when the cap is reached and it waits: asking again keeps its place, and
  the time it has waited (a node job parks longer the longer it has waited); taking a slot takes it
  off the list. Safe to repeat.
]]
local ttl = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return { 1 } end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ttl)
  return { 1 }
end
redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1])
redis.call('EXPIRE', KEYS[2], ttl)
return { 0, now - tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1])) }
