--[[
  Stores what one reflection made of an agent's lessons, in one step: every lesson written, the
  lessons version moved on when anything in effect changed, the since-last-reflection counters
  (failures per service, negative feedback and successful uses per lesson) reset.
  KEYS[1] meta, KEYS[2] runs, KEYS[3] stats, KEYS[4] lessons
  ARGV[1] '1' when something in effect changed, ARGV[2] reflection time (ISO), ARGV[3] the lessons
  version the reflection read, or '' to write every lesson, ARGV[4..] pairs of lesson id, lesson JSON,
  then the idle TTL (see memory.lib.lua)
  A lesson changed since the reflection read it (an operator's override, a probe's retirement: its
  version is past the one read) keeps that change: the reflection's copy is not written.
  Returns the agent's lessons version after it.
]]
local read = tonumber(ARGV[3])
for i = 4, #ARGV - 1, 2 do
  local current = redis.call('HGET', KEYS[4], ARGV[i])
  if not (read and current and cjson.decode(current).version > read) then
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  end
end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if ARGV[1] == '1' then version = redis.call('HINCRBY', KEYS[1], 'version', 1) end
local stale = {}
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local head = string.match(field, '^(%a+):')
  if head == 'fails' or head == 'against' or head == 'used' then stale[#stale + 1] = field end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
redis.call('HSET', KEYS[1], 'sinceReflect', 0, 'lastReflectAt', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'reflections', 1)
return version
