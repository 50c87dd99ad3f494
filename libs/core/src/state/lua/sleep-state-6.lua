--[[
  Where a sleeping wait node stands (`{"kind": "wait", "until" | "forMs"}`): its wake time and
  whether it has woken. The wake time is set once, on the node's first call (`waitUntil:<node>`), so
  a job that re-enters, or is redelivered after a worker or Redis restart, sleeps to the same
  instant: a `forMs` sleep is not started again. The first call appends `node.sleeping` {until};
  every call before the wake time marks the node `waiting` until then. The first call at or after
  the wake time appends `node.woke` {until}, once (`woke:<node>`), however many jobs find the sleep
  over.
  ARGV[1] node id, ARGV[2] wake time to set if none (epoch ms), ARGV[3] now (epoch ms),
  ARGV[4] live state JSON while it sleeps (the script adds `until`)
  Returns { wake time (epoch ms), 1 when the sleep is over else 0 }; { 0, 1 }, writing nothing,
  for a run that expired or was deleted (nothing is left to sleep for).
]]
-- It writes aux and events, which exist while the run is unsettled, and live, which settling deletes.
ttlKeys = { 4 }
if redis.call('EXISTS', KEYS[1]) == 0 then return { 0, 1 } end
local node = ARGV[1]
local first = redis.call('HSETNX', KEYS[6], 'waitUntil:' .. node, ARGV[2]) == 1
local wake = tonumber(redis.call('HGET', KEYS[6], 'waitUntil:' .. node))
local event = {}
event['until'] = isoOf(wake)
if first then emit('node.sleeping', node, cjson.encode(event)) end
if tonumber(ARGV[3]) < wake then
  local live = cjson.decode(ARGV[4])
  live['until'] = event['until']
  redis.call('HSET', KEYS[4], node, cjson.encode(live))
  return { wake, 0 }
end
if redis.call('HSETNX', KEYS[6], 'woke:' .. node, ARGV[3]) == 1 then
  emit('node.woke', node, cjson.encode(event))
end
return { wake, 1 }
