--[[
  Notes an event as a debounce key's latest, unless a later one (by seq) is already noted or was
  already consumed by a run: events handled out of order by several sense workers, or handled again
  after a crash, never move the latest back.
  KEYS[1] the debounce key's hash: seq, e (JSON), done (the last seq a run consumed)
  ARGV[1] the event's seq   ARGV[2] its JSON   ARGV[3] the hash's TTL (ms)
  Returns 1 when noted, 0 when a later event stands.
]]
local seq = tonumber(ARGV[1])
local current = tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1')
local done = tonumber(redis.call('HGET', KEYS[1], 'done') or '-1')
if seq <= current or seq <= done then return 0 end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'e', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
