--[[
  /new and /reset: a fresh context for the session (history and bootstrap snapshot start over).
  KEYS: meta, queue, buffer, transcript, env. ARGV[1] now (ISO), ARGV[2] transcript line JSON; then the
  idle TTL and the transcript cap (see session.lib.lua).
  The context's lines start after the command line (contextFrom, a line number); its compactions
  start over.
  Returns the new context id.
]]
local id = redis.call('HINCRBY', KEYS[1], 'contextId', 1)
redis.call('HDEL', KEYS[1], 'bootstrap', 'compaction')
redis.call('HSET', KEYS[1], 'contextStartedAt', ARGV[1])
appendLines({ ARGV[2] })
redis.call('HSET', KEYS[1], 'contextFrom', transcriptLength())
return id
