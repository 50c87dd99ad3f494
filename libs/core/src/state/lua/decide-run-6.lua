--[[
  Sets a run's outcome unless one is already set; the first decision wins.
  ARGV[1] status (succeeded|failed|cancelled|timed_out), ARGV[2] error JSON or '',
  ARGV[3] abort channel, ARGV[4] run id, ARGV[5] decidedAt (ISO),
  ARGV[6] generation the decision is for, or '' for the current one
  Returns { 1 when this call decided the outcome else 0, child run ids JSON or false, the run's
  status after this call or false }.
  Any outcome other than succeeded is published on the abort channel so workers abort its nodes.
]]
local status = redis.call('HGET', KEYS[1], 'status')
local children = redis.call('HGET', KEYS[6], 'children') or false
if status ~= 'queued' and status ~= 'running' then return { 0, children, status or false } end
if ARGV[6] ~= '' and tonumber(ARGV[6]) ~= generation() then return { 0, children, status } end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'decidedAt', ARGV[5])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[2]) end
emit('run.decided', '', '{"status":"' .. ARGV[1] .. '"}')
if ARGV[1] ~= 'succeeded' then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
return { 1, children, ARGV[1] }
