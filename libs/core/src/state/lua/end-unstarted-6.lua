--[[
  Ends a run none of whose nodes ran — a task run whose plan failed or was rejected, a run that
  ended before it was planned, a session run cancelled in its lane — in one step: decides its
  outcome unless one is set (the first decision wins), gives every node of its plan (if it has
  one) a snapshot (cancelled for a cancelled run, else skipped), and settles it.
  ARGV[1] status to decide, or '' to settle only a run already decided, ARGV[2] error JSON or '',
  ARGV[3] now (ISO), ARGV[4] abort channel, ARGV[5] settled channel, ARGV[6] run id,
  ARGV[7] ttl seconds
  Returns { 1 when this call settled the run else 0, the run's status after it or false }.
  A run that does not exist, that settled before, or that is running (its nodes may have run) is
  left alone, and so is a queued run when no status is given.
]]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return { 0, false } end
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 or status == 'running' then return { 0, status } end
if status == 'queued' then
  if ARGV[1] == '' then return { 0, status } end
  decideRun(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6])
end
status = redis.call('HGET', KEYS[1], 'status')
local fill = status == 'cancelled' and 'cancelled' or 'skipped'
local plan = redis.call('HGET', KEYS[1], 'plan')
if plan then
  -- Written as text: status first, as every snapshot is stored, and attempts a list (cjson would
  -- write an empty table as {}).
  local snapshot = '{"status":"' .. fill .. '","attempts":[],"finishedAt":' .. cjson.encode(ARGV[3])
    .. ',"durationMs":0}'
  for _, node in ipairs(cjson.decode(plan).nodes) do
    if redis.call('HSETNX', KEYS[3], node.id, snapshot) == 1 then
      countNode(fill, 1)
      emit('node.' .. fill, node.id, '')
    end
  end
end
local err = redis.call('HGET', KEYS[1], 'error')
local final = '{"status":"' .. status .. '","error":' .. (err or 'null') .. ',"generation":' .. generation() .. '}'
settleRun(ARGV[3], '', tonumber(ARGV[7]), ARGV[5], ARGV[6], final)
return { 1, status }
