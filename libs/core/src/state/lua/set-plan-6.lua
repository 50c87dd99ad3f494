--[[
  Stores the first plan of a task run: its graph, executable plan and readiness counters, and its
  node count (`nodeCount`, from the plan event's `nodes`).
  ARGV[1] graph JSON, ARGV[2] executable plan JSON, ARGV[3] readiness counters (JSON object),
  ARGV[4] planning record JSON, ARGV[5] usage to charge (JSON object), ARGV[6] plan event data JSON,
  ARGV[7] the plan cache entry the plan came from or was stored in (empty: none), ARGV[8] the run
  that entry names, ARGV[9] the skills record of a loop-mode run's prompt (empty: none). A loop-mode
  run's graph is made, not planned: its planning record (ARGV[4]) is empty.
  Returns 1 when stored, 0 when the run already has a plan or does not exist.
]]
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'plan') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'graph', ARGV[1], 'plan', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'planning', ARGV[4]) end
if ARGV[9] and ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'skills', ARGV[9]) end
redis.call('HSET', KEYS[1], 'nodeCount', cjson.decode(ARGV[6]).nodes)
if ARGV[7] and ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'planCacheKey', ARGV[7], 'planCacheFrom', ARGV[8]) end
for k, v in pairs(cjson.decode(ARGV[3])) do redis.call('HSET', KEYS[2], k, v) end
charge(ARGV[5])
emit('plan', '', ARGV[6])
return 1
