--[[
  Records a node's snapshot (once, counted under its status) and releases the dependents it was the
  last to wait for.
  ARGV[1] node id, ARGV[2] snapshot JSON, ARGV[3] event type, ARGV[4] event data JSON,
  ARGV[5] '1' to release dependents, ARGV[6] JSON list of the jobs whose handed-off children are
  this completion's own (the completing job's, a moved node's earlier carrier) or '', ARGV[7] usage to charge
  (JSON object of integers, e.g. {"toolTimeMs":12,"promptTokens":30}), ARGV[8] the node handoff
  ('' for none): JSON {generation, live, width, candidates: [{id, charge, reads}]}, the children the
  job may run next in the order it prefers them and how many of them it may take, ARGV[9] the
  number of nodes in the run's plan ('' not to decide the run), ARGV[10] the generation of that
  plan (the completing job's), ARGV[11..] children
  Returns { written (1 = this call wrote the snapshot, 0 = it existed), run status after the call,
  generation, handed-off child ids | false, their begin answers | false, their start time (ISO) |
  false, 1 when this call decided the run | 0, ready child ids... };
  { 0, false, 0, false, false, false, 0 }, writing nothing, for an unknown run.
  Deciding the run: when the snapshot this call wrote is the last of the plan's ARGV[9] nodes and
  every one of them succeeded, the run is decided `succeeded` here, as decide-run-6.lua would (the
  caller settles it; if it stops first, the root job's finalize pass does). Not for a job of
  another generation than the run's (its plan may not be the run's now), not while a replan is
  asked for, nor in window mode, whose drained window asks for the next one. Found from the count
  of succeeded snapshots this call increments, so no other node pays a command for it, then
  checked against the stored plan once: each of its nodes has a succeeded snapshot.
  Node handoff: when this call wrote the snapshot and released candidates, the first `width` of them
  (at least one) are begun here as begin-node-6.lua would (`beginNode` in run.lib.lua), so the job's
  next nodes start in the same step, their `startedAt` (in the live JSON given) set to this step's
  instant and `by` to this node; they stay among the ready ids.
  A child is ready when its counter is 0 and it has no snapshot; it is marked queued with the id of
  the node that released it (`by`). On a redelivery (written = 0) the counters are not decremented
  again, but the ready children this node released are returned again, so a crash between this
  script and the enqueue cannot strand them; their job ids are deterministic, so adding them twice
  is harmless. Left out are those another node released and those another job runs handed off
  (`carriedBy`, executor/handoff.ts): they have no job, and adding one would run them twice.
  Of the run's keys it may create only `nodes` (its first snapshot); the run's hash is read once.
]]
ttlKeys = { 3 }

-- Whether a redelivery answers a ready child again: one this node released and no other job runs
-- handed off. A child marked queued before `by` existed, or in its own job, is answered (adding its
-- job again is a no-op). A child begun handed off names the node that released it (`by`) beside its
-- carrier: a moved node's redelivery names the same carrier as the sibling that released the child
-- there, and must leave it to that sibling's job.
local function releasedHere(live, id, jobs)
  if not live then return true end
  local state = cjson.decode(live)
  if state.carriedBy then return jobs[state.carriedBy] == true and (state.by == nil or state.by == id) end
  if state.status == 'queued' and state.by then return state.by == id end
  return true
end

local id = ARGV[1]
local meta = redis.call('HMGET', KEYS[1], 'status', 'generation', 'replan', 'eventsMax', 'mode')
local status = meta[1]
-- A run that expired or was deleted gets no keys back from a late node.
if not status then return { 0, false, 0, false, false, false, 0 } end
eventsMax = tonumber(meta[4] or '10000')
local written = redis.call('HSETNX', KEYS[3], id, ARGV[2])
local succeeded = nil
if written == 1 then
  redis.call('HDEL', KEYS[4], id)
  local written_status = snapshotStatus(ARGV[2])
  local count = countNode(written_status, 1)
  if written_status == 'succeeded' then succeeded = count end
  charge(ARGV[7])
  emit(ARGV[3], id, ARGV[4])
  -- A tool node's result is also a tool event.
  if string.find(ARGV[4], '"tool":', 1, true) then emit('tool.result', id, ARGV[4]) end
end
-- Whether every node of the run's stored plan (`planned` of them) has a succeeded snapshot. Read
-- once per run, when the count says so: the count is never above the truth for the plan's nodes,
-- but a snapshot of a node of no plan now (a stale job's) would count too.
local function planSucceeded(planned)
  local raw = redis.call('HGET', KEYS[1], 'plan')
  if not raw then return false end
  local ok, plan = pcall(cjson.decode, raw)
  if not ok or type(plan) ~= 'table' or type(plan.nodes) ~= 'table' or #plan.nodes ~= planned then
    return false
  end
  local ids = {}
  for i, node in ipairs(plan.nodes) do ids[i] = node.id end
  local snapshots = hmgetList(KEYS[3], ids)
  for i = 1, #ids do
    if not snapshots[i] or snapshotStatus(snapshots[i]) ~= 'succeeded' then return false end
  end
  return true
end

local result = { written, status, tonumber(meta[2] or '0'), false, false, false, 0 }
local planned = tonumber(ARGV[9])
if succeeded and planned and succeeded >= planned and status == 'running' and not meta[3]
  and meta[5] ~= 'window' and tonumber(ARGV[10]) == tonumber(meta[2] or '0') and planSucceeded(planned) then
  decideRun('succeeded', '', isoNow(), '', '')
  result[2] = 'succeeded'
  result[7] = 1
  return result
end
-- Nothing new starts while the run waits to be replanned.
if ARGV[5] ~= '1' or meta[3] then return result end
local counted = {}
for i = 11, #ARGV do
  local child = ARGV[i]
  local left
  if written == 1 then
    left = redis.call('HINCRBY', KEYS[2], child, -1)
  else
    left = tonumber(redis.call('HGET', KEYS[2], child) or '-1')
  end
  if left == 0 then counted[#counted + 1] = child end
end
if #counted == 0 then return result end
-- Those without a snapshot are ready, read in one HMGET and marked queued in one HSET.
local snapshots = hmgetList(KEYS[3], counted)
local lives = written == 1 and {} or hmgetList(KEYS[4], counted)
local jobs = {}
if written == 0 and ARGV[6] ~= '' then
  for _, job in ipairs(cjson.decode(ARGV[6])) do jobs[job] = true end
end
local queuedLive = cjson.encode({ status = 'queued', by = id })
local queued = {}
for i, child in ipairs(counted) do
  if not snapshots[i] and (written == 1 or releasedHere(lives[i], id, jobs)) then
    result[#result + 1] = child
    queued[#queued + 1] = child
    queued[#queued + 1] = queuedLive
  end
end
if status == 'running' and written == 1 and #queued > 0 then
  for from = 1, #queued, 1000 do
    redis.call('HSET', KEYS[4], unpack(queued, from, math.min(from + 999, #queued)))
  end
  for i = 1, #queued, 2 do emit('node.queued', queued[i], '') end
  if ARGV[8] ~= '' then
    local handoff = cjson.decode(ARGV[8])
    local isReady = {}
    for i = 1, #queued, 2 do isReady[queued[i]] = true end
    local width = math.max(1, tonumber(handoff.width) or 1)
    local ids, begins, startedAt, live = {}, {}, nil, nil
    for _, candidate in ipairs(handoff.candidates) do
      if #ids >= width then break end
      if isReady[candidate.id] then
        -- They start at this step's instant, the same as their node.queued: never before ready.
        if not startedAt then
          startedAt = isoNow()
          live = string.gsub(handoff.live, '"startedAt":"[^"]*"', '"startedAt":"' .. startedAt .. '"')
          live = '{"by":' .. cjson.encode(id) .. ',' .. string.sub(live, 2)
        end
        ids[#ids + 1] = candidate.id
        begins[#begins + 1] = beginNode(candidate.id, handoff.generation, live, true, candidate.charge,
          candidate.reads)
      end
    end
    if startedAt then
      result[4] = ids
      result[5] = begins
      result[6] = startedAt
    end
  end
end
return result
