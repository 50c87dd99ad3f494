--[[
  Records a compaction of the current context's history: the session's `compaction` field and a
  `compaction` line in the transcript, together. Nothing is written when the context or its latest
  compaction changed since the history was read (a /new or /reset came, or another compaction of
  the same turns was recorded first).
  KEYS: meta, queue, buffer, transcript, env. ARGV[1] contextFrom the history was read with,
  ARGV[2] covers.toIndex of the compaction it was read with (-1: none), ARGV[3] the new compaction
  record JSON ({summary, covers}), ARGV[4] the transcript line JSON; then the idle TTL and the
  transcript cap (see session.lib.lua).
  Returns 1 when recorded, 0 when not.
]]
local from = tonumber(redis.call('HGET', KEYS[1], 'contextFrom') or '-1')
if from ~= tonumber(ARGV[1]) then return 0 end
local current = redis.call('HGET', KEYS[1], 'compaction')
local to = -1
if current then to = cjson.decode(current).covers.toIndex end
if to ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'compaction', ARGV[3])
appendLines({ ARGV[4] })
return 1
