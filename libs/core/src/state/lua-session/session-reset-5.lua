--[[
  /new and /reset: a fresh context for the session (history and bootstrap snapshot start over).
  KEYS: meta, queue, buffer, transcript, env. ARGV[1] now (ISO), ARGV[2] transcript line JSON
  Returns the new context id.
]]
local id = redis.call('HINCRBY', KEYS[1], 'contextId', 1)
redis.call('HDEL', KEYS[1], 'bootstrap')
redis.call('HSET', KEYS[1], 'contextStartedAt', ARGV[1])
redis.call('RPUSH', KEYS[4], ARGV[2])
return id
