--[[
  Records one event of a tenant, once within the dedupe window: the same id again finds it.
  KEYS[1] the event's hash (by its id's hash): e (JSON), seq, q (handed to the sense loop)
  KEYS[2] the tenant's event counter
  ARGV[1] the event JSON (without seq)
  ARGV[2] the dedupe window (ms): the hash's TTL
  Returns {0, seq} for a new event; {1, seq} for one seen before but not yet handed to the sense
  loop (its first request may have stopped between the two: hand it again); {2, seq} for one seen
  and handed.
]]
if redis.call('EXISTS', KEYS[1]) == 1 then
  local seq = tonumber(redis.call('HGET', KEYS[1], 'seq'))
  if redis.call('HEXISTS', KEYS[1], 'q') == 1 then return { 2, seq } end
  return { 1, seq }
end
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'e', ARGV[1], 'seq', seq)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return { 0, seq }
