--[[
  Records a settled run in its agent's memory, in one step: its summary at the head of the hot
  set (trimmed to its cap), its calls in the per-service counters, the run counters and failure
  streak the reflection triggers read, and, for a run that succeeded, a little more confidence for
  each lesson it applied and a successful use counted for the next reflection (no version change:
  nothing about its effect changed).
  KEYS[1] meta, KEYS[2] runs, KEYS[3] stats, KEYS[4] lessons
  ARGV[1] summary JSON, ARGV[2] hot set cap, ARGV[3] '1' when the run succeeded,
  ARGV[4] JSON list of the lesson ids it applied, ARGV[5] confidence added per successful use,
  ARGV[6] JSON object of counter increments (field → n), ARGV[7] JSON list of `<tool>|<target>`
  of its failed calls, one per failure, ARGV[8] the idle TTL (see memory.lib.lua)
  Returns { runs settled since the last reflection, failed runs in a row, the most failures of one
  service since the last reflection }.
]]
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
for field, n in pairs(cjson.decode(ARGV[6])) do redis.call('HINCRBY', KEYS[3], field, n) end
redis.call('HINCRBY', KEYS[1], 'settled', 1)
local since = redis.call('HINCRBY', KEYS[1], 'sinceReflect', 1)
local streak = 0
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'streak', 0)
  for _, id in ipairs(cjson.decode(ARGV[4])) do
    local raw = redis.call('HGET', KEYS[4], id)
    local lesson = raw and cjson.decode(raw)
    if lesson and (lesson.status == 'active' or lesson.status == 'pinned') then
      lesson.confidence = math.min(1, lesson.confidence + tonumber(ARGV[5]))
      redis.call('HSET', KEYS[4], id, cjson.encode(lesson))
      -- A successful use is a case for the lesson: the next reflection does not let it decay.
      redis.call('HINCRBY', KEYS[1], 'used:' .. id, 1)
    end
  end
else
  streak = redis.call('HINCRBY', KEYS[1], 'streak', 1)
end
local worst = 0
for _, service in ipairs(cjson.decode(ARGV[7])) do
  local n = redis.call('HINCRBY', KEYS[1], 'fails:' .. service, 1)
  if n > worst then worst = n end
end
return { since, streak, worst }
