--[[
  Closes a run once no node can run any more: nodes without a snapshot get the given one
  (skipped or cancelled), the output is stored, finishedAt is set, every key of the run gets its
  retention TTL, the final event is appended and the settled channel is told.
  ARGV[1] finishedAt (ISO), ARGV[2] output JSON or '', ARGV[3] ttl seconds, ARGV[4] settled channel,
  ARGV[5] run id, ARGV[6] generation being settled, ARGV[7] final event data JSON,
  ARGV[8] the run deadlines (a sorted set in another slot: the run leaves it),
  then triples: node id, snapshot JSON, event type, for nodes that may lack a snapshot
  Returns 1 when this call settled the run, 0 when it was settled before, belongs to an older
  generation, is not decided yet or does not exist.
]]
-- It gives every key of the run its retention TTL itself.
ttlKeys = {}
local status = redis.call('HGET', KEYS[1], 'status')
-- Only a run whose outcome is decided settles; an unknown run is not created.
if not status or status == 'queued' or status == 'running' then return 0 end
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 then return 0 end
if tonumber(ARGV[6]) ~= generation() then return 0 end
for i = 9, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1]) == 1 then
    countNode(snapshotStatus(ARGV[i + 1]), 1)
    emit(ARGV[i + 2], ARGV[i], '')
  end
end
settleRun(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[7])
indexRem(ARGV[8], ARGV[5])
return 1
