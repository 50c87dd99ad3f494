--[[
  Sets a lesson's status (an operator's override, or a probe that found its service back) and
  moves the agent's lessons version on.
  KEYS[1] meta, KEYS[2] runs, KEYS[3] stats, KEYS[4] lessons
  ARGV[1] lesson id, ARGV[2] status, ARGV[3] now (ISO), ARGV[4] the idle TTL (see memory.lib.lua)
  Returns the lesson JSON after the change, or false for an unknown lesson.
]]
local raw = redis.call('HGET', KEYS[4], ARGV[1])
if not raw then return false end
local lesson = cjson.decode(raw)
if lesson.status == ARGV[2] then return raw end
lesson.status = ARGV[2]
lesson.updatedAt = ARGV[3]
-- A retired lesson counts only runs after this (lesson-lifecycle.ts).
if ARGV[2] == 'retired' then lesson.retiredAt = ARGV[3] end
lesson.missed = 0
lesson.version = redis.call('HINCRBY', KEYS[1], 'version', 1)
raw = cjson.encode(lesson)
redis.call('HSET', KEYS[4], ARGV[1], raw)
return raw
