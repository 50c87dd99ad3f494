--[[
  A service answered `429` (or said a limit is used up). KEYS[1] the flow base (flow.lib.lua): the
  counters' keys are named from it, as their number varies with the call.
  ARGV[1] JSON list of its counters, ARGV[2]
  ms it asked to wait (0: none given), ARGV[3] factor to scale the limit by (multiplicative
  decrease; 1: pause only), ARGV[4] the lowest factor,
  ARGV[5] ms between two decreases (a burst of 429s from calls already in flight cuts once).
  Counters declared `adaptive: false` are left alone. Returns each counter's factor after.
]]
local now = clock()
local factors = {}
for _, k in ipairs(cjson.decode(ARGV[1])) do
  local v = redis.call('HMGET', kk(k), 'adaptive', 'factor', 'lastCut', 'pausedUntil')
  local f = tonumber(v[2]) or 1
  if v[1] ~= 'false' then
    if tonumber(ARGV[3]) < 1 and now - (tonumber(v[3]) or 0) >= tonumber(ARGV[5]) then
      f = math.max(tonumber(ARGV[4]), f * tonumber(ARGV[3]))
      redis.call('HSET', kk(k), 'factor', tostring(f), 'lastCut', now)
    end
    local ra = tonumber(ARGV[2])
    if ra > 0 and now + ra > (tonumber(v[4]) or 0) then
      redis.call('HSET', kk(k), 'pausedUntil', now + ra)
    end
    redis.call('PEXPIRE', kk(k), DAY)
  end
  factors[#factors + 1] = tostring(f)
end
return factors
