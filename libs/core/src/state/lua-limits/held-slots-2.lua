--[[
  The members that have held their slot for at least a given time, by Redis's clock (the one
  acquire-slot-2 scores them with), oldest first.
  KEYS[1] the running members, KEYS[2] the waiting members (see acquire-slot-2; not read)
  ARGV[1] how long a member must have held its slot (ms)
  Returns member, score, member, score, … (the score as forget-slots-2 compares it).
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'WITHSCORES')
