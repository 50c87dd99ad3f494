--[[
  Takes one request from each of two token buckets, all or nothing (a request counts against its
  API key and its tenant at once).
  KEYS[1], KEYS[2] the buckets (hashes: tokens, at)
  ARGV[1], ARGV[2] each bucket's rate in requests per minute; 0 turns that bucket off (its key is
  not touched)
  A bucket holds at most a minute's requests and refills continuously; it expires once idle for a
  minute, when it would be full again, so an absent bucket is a full one.
  Returns { 1, 0, 0 } when the request is taken; { 0, ms until a request fits, index (1 or 2) of
  the bucket that is empty } when it is not, taking nothing.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local levels = {}
local waitMs, empty = 0, 0
for i = 1, 2 do
  local rate = tonumber(ARGV[i])
  if rate > 0 then
    local perMs = rate / 60000
    local state = redis.call('HMGET', KEYS[i], 'tokens', 'at')
    local tokens = tonumber(state[1]) or rate
    local at = tonumber(state[2]) or now
    tokens = math.min(rate, tokens + math.max(0, now - at) * perMs)
    levels[i] = tokens
    if tokens < 1 then
      local wait = math.ceil((1 - tokens) / perMs)
      if wait > waitMs then waitMs, empty = wait, i end
    end
  end
end
if empty > 0 then return { 0, waitMs, empty } end
for i = 1, 2 do
  if levels[i] then
    redis.call('HSET', KEYS[i], 'tokens', tostring(levels[i] - 1), 'at', tostring(now))
    redis.call('PEXPIRE', KEYS[i], 60000)
  end
end
return { 1, 0, 0 }
