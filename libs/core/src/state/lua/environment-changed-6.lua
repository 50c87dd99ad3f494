--[[
  Hands a running run the changes of its session's environment since its plan last saw it, in
  one step: records the version, appends `environment.changed`, and either hands a planned (dag)
  task run back to the plan loop with what changed, or appends it to the steering messages an
  agent reads before its next turn. Nothing happens when the version did not move.
  ARGV[1] the environment's version, ARGV[2] JSON list of the environment's recent entries as
  lines, newest last (the last version - seen of them are new)
  Returns 1 when the run was told of a change, else 0.
]]
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
local version = tonumber(ARGV[1])
local seen = tonumber(redis.call('HGET', KEYS[1], 'envVersion') or '0')
if version <= seen then return 0 end
local recent = cjson.decode(ARGV[2])
local fresh = {}
for i = math.max(1, #recent - (version - seen) + 1), #recent do fresh[#fresh + 1] = recent[i] end
redis.call('HSET', KEYS[1], 'envVersion', version)
local changed = { version = version, events = fresh }
local changedJson = cjson.encode(changed)
if #fresh == 0 then changedJson = string.gsub(changedJson, '"events":{}', '"events":[]') end
emit('environment.changed', '', changedJson)
if redis.call('HGET', KEYS[1], 'task') and redis.call('HGET', KEYS[1], 'mode') ~= 'loop' then
  local failure = cjson.encode({
    code = 'environment_changed',
    message = 'the environment changed: ' .. table.concat(fresh, ' | '),
  })
  requestReplan(failure, generation())
else
  local steer = cjson.decode(redis.call('HGET', KEYS[6], 'steer') or '[]')
  for _, line in ipairs(fresh) do steer[#steer + 1] = line end
  redis.call('HSET', KEYS[6], 'steer', #steer == 0 and '[]' or cjson.encode(steer))
end
return 1
