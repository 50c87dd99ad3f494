--[[
  Moves a queued run to running (first start or after a resume) and marks its ready nodes queued.
  ARGV[1] now (ISO), ARGV[2] deadline (epoch ms), ARGV[3] generation of the root job,
  ARGV[4] live JSON for a queued node, ARGV[5] retention of a settled run (seconds),
  ARGV[6] the index of queued runs (in another slot: on a cluster an `indexWrites` entry),
  ARGV[7] the run id, ARGV[8] the run deadlines (a sorted set in another slot, as ARGV[6]),
  ARGV[9] how many first nodes one carrier job takes ('0': none; executor/carrier-job.ts),
  ARGV[10..] ready node ids
  Returns { status after the call, or 'stale' when the root job belongs to an older generation,
  or false when the run does not exist; deadline (epoch ms); the carrier width the run started
  with (a redelivered start pass gets the first one's, so it makes the same carriers) | false }.
]]
-- It writes the run's hash, live and events, which exist while the run is queued.
ttlKeys = {}
-- Started (now, or before: a redelivered root job), ended or gone, the run leaves the index of
-- queued runs the reconciler reads, in this step rather than a round trip of its own before the
-- ready nodes are enqueued; last, so a script that stopped on an error leaves the run indexed.
local function unqueue()
  indexRem(ARGV[6], ARGV[7])
end
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  unqueue()
  return { false }
end
if tonumber(ARGV[3]) ~= generation() then return { 'stale' } end
-- A redelivered root job of a run already started learns the deadline it was given (and puts the
-- run among the deadlines again: on a cluster the first delivery may have stopped before it did).
if status ~= 'queued' then
  if status == 'running' then indexSet(ARGV[8], redis.call('HGET', KEYS[1], 'deadlineAt'), ARGV[7]) end
  unqueue()
  local held = redis.call('HMGET', KEYS[1], 'deadlineAt', 'carryWidth')
  return { status, held[1] or false, held[2] or false }
end
setStatus('running')
-- A replanned run keeps its deadline; a new or resumed one gets one now.
redis.call('HSETNX', KEYS[1], 'deadlineAt', ARGV[2])
redis.call('HSETNX', KEYS[1], 'startedAt', ARGV[1])
if ARGV[9] ~= '0' then redis.call('HSET', KEYS[1], 'carryWidth', ARGV[9]) end
-- From now until it settles the run may wait (for a signal, an approval, a budget decision, a
-- time) as long as its deadline allows, weeks perhaps, and may have sat queued long before (a
-- session run behind one that waits): its keys live at least until the deadline plus the retention,
-- never less than they had (GT). Settling gives them the retention.
local keep = tonumber(redis.call('HGET', KEYS[1], 'deadlineAt')) + tonumber(ARGV[5]) * 1000
for i = 1, 6 do redis.call('PEXPIREAT', KEYS[i], keep, 'GT') end
emit('run.started', '', '{"generation":' .. ARGV[3] .. '}')
-- Among the run deadlines the plan pool sweeps (executor/run-deadlines.ts) until it settles.
indexSet(ARGV[8], redis.call('HGET', KEYS[1], 'deadlineAt'), ARGV[7])
for i = 10, #ARGV do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[4])
  emit('node.queued', ARGV[i], '')
end
unqueue()
return { 'running', redis.call('HGET', KEYS[1], 'deadlineAt'), ARGV[9] }
