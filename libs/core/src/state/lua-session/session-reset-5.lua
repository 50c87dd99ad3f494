--[[
  /new and /reset: a fresh context for the session (history and bootstrap snapshot start over).
  KEYS: meta, queue, buffer, transcript, env. ARGV[1] now (ISO), ARGV[2] transcript line JSON
  The context's lines start after the command line (contextFrom); its compactions start over.
  Returns the new context id.
]]
local id = redis.call('HINCRBY', KEYS[1], 'contextId', 1)
redis.call('HDEL', KEYS[1], 'bootstrap', 'compaction')
redis.call('HSET', KEYS[1], 'contextStartedAt', ARGV[1])
local length = redis.call('RPUSH', KEYS[4], ARGV[2])
redis.call('HSET', KEYS[1], 'contextFrom', length)
return id
