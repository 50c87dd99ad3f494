--[[
  Stores a new run, queued — or answers the run that has this id already. The create is
  idempotent on the run id: a run whose id derives from its tenant and Idempotency-Key is created
  by whichever request gets here first, and every other request (a retry, a concurrent duplicate,
  a command ioredis re-sent after a reconnect) finds it and changes nothing. No claim key is
  written beside the run, so no crash can leave a claim without its run.
  A run with `index` in its fields is added to its tenant's search indexes (all, its status, its
  agent, its session, each tag, its schedule or trigger). A rerun starts with its origin's snapshots of the nodes it does not
  run again: they are written here, with a `node.reused` event each, so the run never exists
  without them.
  ARGV[1] meta fields (JSON object of strings; `_lists`, on one Redis only, names the run-listing
  indexes to add it to: {queued, runs, id, score, keepMs, ttl}; `_steer`, the steering messages the
  run starts with, a JSON list kept in `aux`), ARGV[2] readiness counters (JSON object of numbers),
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
-- On one Redis the tenant's index of runs and the index of queued runs come with the run (not
-- fields of it): written here, in the same step, instead of a MULTI of their own.
local lists = meta['_lists']
meta['_lists'] = nil
-- A session run woken by an event reads it before its agent's first turn (loop-agent.ts).
local steer = meta['_steer']
meta['_steer'] = nil
if lists then
  redis.call('ZADD', lists.queued, 'NX', lists.score, lists.id)
  redis.call('ZADD', lists.runs, 'NX', lists.score, lists.id)
  redis.call('ZREMRANGEBYSCORE', lists.runs, '-inf', string.format('%d', lists.score - lists.keepMs))
  redis.call('EXPIRE', lists.runs, lists.ttl)
end
-- One HSET per hash, every field at once.
local function hsetAll(key, fields)
  local args = {}
  for k, v in pairs(fields) do
    args[#args + 1] = k
    args[#args + 1] = v
  end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
end
hsetAll(KEYS[1], meta)
hsetAll(KEYS[2], cjson.decode(ARGV[2]))
-- Placeholders so every key of the run exists now and carries the safety TTL below.
redis.call('HSET', KEYS[4], '_', '{}')
redis.call('HSET', KEYS[6], 'createdAt', meta.createdAt or '')
if steer then redis.call('HSET', KEYS[6], 'steer', steer) end
-- The hash was just written from `meta`: its events cap and search index are taken from there, not
-- read back.
eventsMax = tonumber(meta.eventsMax or '10000')
emit('run.queued', '', '')
local ix = meta.index and cjson.decode(meta.index)
if ix then
  indexAdd(ix, ':all')
  indexAdd(ix, ':status:' .. meta.status)
  indexAdd(ix, ':agent:' .. meta.agentId)
  if meta.sessionKey then indexAdd(ix, ':session:' .. meta.sessionKey) end
  if meta.tags then
    for _, tag in ipairs(cjson.decode(meta.tags)) do indexAdd(ix, ':tag:' .. tag) end
  end
  if meta.scheduleId then indexAdd(ix, ':schedule:' .. meta.scheduleId) end
  if meta.triggerId then indexAdd(ix, ':trigger:' .. meta.triggerId) end
end
for i = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  local status = snapshotStatus(ARGV[i + 1])
  countNode(status, 1)
  emit('node.reused', ARGV[i], cjson.encode({ status = status, from = ARGV[4] }))
end
for i = 1, 6 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[3])) end
return { 1 }
