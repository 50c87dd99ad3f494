--[[
  The periodic step (every worker process runs it while limits are declared): grants waiters whose
  counters have room again (a rate's interval moved on, a pause ended, a lease expired), wakes
  again members granted ARGV[2] ms ago or more that have not started (their job was not parked
  yet when it was first woken), and revokes grants not taken up within ARGV[1] ms.
  KEYS[1] the flow base, KEYS[2] the counters with waiters, KEYS[3] the granted members
  (flow.lib.lua); the keys of the counters and members found there are named from KEYS[1].
  ARGV[1] lease ms, ARGV[2] ms before a grant is woken again, ARGV[3] most grants per counter.
  Returns the members to wake.
]]
local now = clock()
local lease, again, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for _, k in ipairs(redis.call('SMEMBERS', WAITING)) do grantOn(k, now, lease, out, budget) end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', GRANTED, '-inf', now - again, 'LIMIT', 0, 200)) do
  local at = tonumber(redis.call('HGET', mk(m), 'grantedAt'))
  if not at or at < now - lease then
    local ids = drop(m)
    for _, k in ipairs(ids) do grantOn(k, now, lease, out, budget) end
  else
    redis.call('ZADD', GRANTED, now, m)
    out[#out + 1] = m
  end
end
return out
