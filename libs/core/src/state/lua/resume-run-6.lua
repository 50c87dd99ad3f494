--[[
  Reopens a settled failed or timed_out run: snapshots of the given nodes (those that did not
  succeed) are dropped with their attempt history, the readiness counters are rebuilt, budgets
  and the deadline start afresh, and the generation moves on so stale jobs are discarded.
  ARGV[1] readiness counters (JSON object), ARGV[2] safety TTL seconds, ARGV[3..] node ids to rerun
  Returns { status: 'queued' when reopened, else the current status or 'settling' or false,
  new generation }.
]]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return { false } end
if status ~= 'failed' and status ~= 'timed_out' then return { status } end
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 0 then return { 'settling' } end
for i = 3, #ARGV do
  forgetNode(ARGV[i])
end
redis.call('DEL', KEYS[2], KEYS[4])
local pending = cjson.decode(ARGV[1])
for k, v in pairs(pending) do redis.call('HSET', KEYS[2], k, v) end
-- A replan requested before the run ended is void: the resumed run runs its own plan again.
redis.call('HDEL', KEYS[1], 'decidedAt', 'finishedAt', 'error', 'output', 'deadlineAt', 'replan', 'followedUp')
setStatus('queued')
local gen = redis.call('HINCRBY', KEYS[1], 'generation', 1)
redis.call('HSET', KEYS[4], '_', '{}')
emit('run.resumed', '', '{"generation":' .. gen .. '}')
for i = 1, 6 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[2])) end
return { 'queued', gen }
