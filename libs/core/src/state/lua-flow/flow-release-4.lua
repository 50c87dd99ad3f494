--[[
  A call ended (or its job gave up waiting). KEYS[1] the flow base, KEYS[2] the counters with
  waiters, KEYS[3] the granted members, KEYS[4] the member's record (flow.lib.lua); the counters'
  keys are named from KEYS[1], as the member's record (or ARGV[6]) lists them.
  ARGV[1] member, ARGV[2] tokens it really used (-1:
  keep the reservation), ARGV[3] '1' when it succeeded (adaptive counters climb back by ARGV[5]),
  ARGV[4] lease ms for members granted now, ARGV[6] and ARGV[7] the call's counters and
  reservations (JSON) when it went at once and so was not remembered.
  Settles its token reservations to what it used, frees its slots, and grants the next waiters.
  Returns the members granted.
]]
local now = clock()
local m = ARGV[1]
local rec = redis.call('HMGET', KEYS[4], 'keys', 'resv')
local remembered = rec[1] ~= false and rec[1] ~= nil
if not remembered and (ARGV[6] or '') == '' then return {} end
local ids = cjson.decode(remembered and rec[1] or ARGV[6])
local resv = cjson.decode((remembered and rec[2]) or ARGV[7] or '{}')
local actual = tonumber(ARGV[2])
for _, k in ipairs(ids) do
  local id = resv[k]
  if actual >= 0 and id and id ~= '' then
    local old = tonumber(redis.call('HGET', kk(k, ':cost'), id))
    if old then
      redis.call('HSET', kk(k, ':cost'), id, actual)
      redis.call('HINCRBY', kk(k), 'logTokens', actual - old)
    end
  end
  if ARGV[3] == '1' then
    local f = tonumber(redis.call('HGET', kk(k), 'factor') or '1')
    if f < 1 then redis.call('HSET', kk(k), 'factor', tostring(math.min(1, f + tonumber(ARGV[5])))) end
  end
end
if remembered then
  drop(m)
else
  for _, k in ipairs(ids) do
    redis.call('ZREM', kk(k, ':inflight'), m)
    local id = resv[k]
    if id and id ~= '' then redis.call('ZADD', kk(k, ':log'), 'XX', now, id) end
  end
end
local out = {}
for _, k in ipairs(ids) do grantOn(k, now, tonumber(ARGV[4]), out, 20) end
return out
