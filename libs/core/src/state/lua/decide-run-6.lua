--[[
  Sets a run's outcome unless one is already set; the first decision wins.
  ARGV[1] status (succeeded|failed|cancelled|timed_out), ARGV[2] error JSON or '',
  ARGV[3] abort channel, ARGV[4] run id, ARGV[5] decidedAt (ISO),
  ARGV[6] generation the decision is for, or '' for the current one
  Returns { 1 when this call decided the outcome else 0, child run ids JSON or false, the run's
  status after this call or false }.
  Any outcome other than succeeded is published on the abort channel so workers abort its nodes.
]]
-- It writes only the run's hash and events (and the search indexes, which have their own TTL).
ttlKeys = {}
local children = redis.call('HGET', KEYS[6], 'children') or false
if ARGV[6] ~= '' and tonumber(ARGV[6]) ~= generation() then
  return { 0, children, redis.call('HGET', KEYS[1], 'status') or false }
end
local decided = decideRun(ARGV[1], ARGV[2], ARGV[5], ARGV[3], ARGV[4])
return { decided and 1 or 0, children, redis.call('HGET', KEYS[1], 'status') or false }
