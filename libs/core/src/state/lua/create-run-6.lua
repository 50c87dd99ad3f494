--[[
  Stores a new run, queued — or answers the run that has this id already. The create is
  idempotent on the run id: a run whose id derives from its tenant and Idempotency-Key is created
  by whichever request gets here first, and every other request (a retry, a concurrent duplicate,
  a command ioredis re-sent after a reconnect) finds it and changes nothing. No claim key is
  written beside the run, so no crash can leave a claim without its run.
  A run with `index` in its fields is added to its tenant's search indexes (all, its status, its
  agent, its session, each tag). A rerun starts with its origin's snapshots of the nodes it does not
  run again: they are written here, with a `node.reused` event each, so the run never exists
  without them.
  ARGV[1] meta fields (JSON object of strings), ARGV[2] readiness counters (JSON object of numbers),
  ARGV[3] safety TTL in seconds (until the run settles and gets its retention TTL),
  ARGV[4] the run the reused snapshots come from ('' for none), ARGV[5..] pairs: node id, snapshot
  JSON (status first, with `reusedFrom`)
  Returns { 1 } when this call created the run, or { 0, status, createdAt } of the existing run.
]]
-- It gives every key of a run it creates its TTL itself.
ttlKeys = {}
if redis.call('EXISTS', KEYS[1]) == 1 then
  local existing = redis.call('HMGET', KEYS[1], 'status', 'createdAt')
  return { 0, existing[1] or false, existing[2] or false }
end
local meta = cjson.decode(ARGV[1])
for k, v in pairs(meta) do redis.call('HSET', KEYS[1], k, v) end
local pending = cjson.decode(ARGV[2])
for k, v in pairs(pending) do redis.call('HSET', KEYS[2], k, v) end
-- Placeholders so every key of the run exists now and carries the safety TTL below.
redis.call('HSET', KEYS[4], '_', '{}')
redis.call('HSET', KEYS[6], 'createdAt', meta.createdAt or '')
emit('run.queued', '', '')
local ix = searchIndex()
if ix then
  indexAdd(ix, ':all')
  indexAdd(ix, ':status:' .. meta.status)
  indexAdd(ix, ':agent:' .. meta.agentId)
  if meta.sessionKey then indexAdd(ix, ':session:' .. meta.sessionKey) end
  if meta.tags then
    for _, tag in ipairs(cjson.decode(meta.tags)) do indexAdd(ix, ':tag:' .. tag) end
  end
end
for i = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  local status = snapshotStatus(ARGV[i + 1])
  countNode(status, 1)
  emit('node.reused', ARGV[i], cjson.encode({ status = status, from = ARGV[4] }))
end
for i = 1, 6 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[3])) end
return { 1 }
