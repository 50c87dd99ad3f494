--[[
  The library every run script shares (prepended when the scripts load), so a step two scripts
  take is written once. The run's keys are always
  KEYS[1] meta, KEYS[2] pending, KEYS[3] nodes, KEYS[4] live, KEYS[5] events, KEYS[6] aux.
  emit(type, nodeId, dataJson) appends an event to the run's stream with the run's next sequence
  number as its id (0-<seq>), so a reader resumes from any seq with XRANGE/XREAD. The seq is the
  stream's own: XADD's `0-*` takes the one after the last id the stream ever gave (Redis 7), which
  trimming keeps, so an event costs one command. The stream keeps about `eventsMax` events (a meta
  field set at creation; 10000 for runs without it): at every 64th event past the cap the older ones
  are trimmed (`XTRIM MAXLEN ~`, whole stream nodes), so it holds at most the cap, a stream node and
  63 more, and readers see the gap in the seqs. The events of one script share one timestamp (its
  step is one instant); a script that reads the run's hash anyway may set `eventsMax` itself.
  Each script's body runs as a function, then `keepTtl()` (see scripts.ts): a key of the run the
  script created (pending, nodes, …) gets the TTL the run's hash has, the safety TTL until the run
  settles and its retention after, so no key of a run outlives it. A script that can only create
  some of the keys names them in `ttlKeys` (see keepTtl), so the others are not looked at.
  The run's status changes only through `setStatus`, which also moves the run between its tenant's
  search indexes (see `searchIndex`); snapshots are counted by status (`count:<status>` in aux) where
  they are written and dropped.
]]
local eventsMax
local eventTs
local TRIM_EVERY = 64
local function emit(etype, node, data)
  if not eventTs then
    local t = redis.call('TIME')
    eventTs = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  local id = redis.call('XADD', KEYS[5], '0-*', 'type', etype, 'ts', eventTs, 'node', node or '', 'data', data or '')
  local seq = tonumber(string.sub(id, 3))
  -- Trimmed at every TRIM_EVERY-th event, not at each: a trimming XADD costs half as much again,
  -- and most runs never reach the cap.
  if seq % TRIM_EVERY == 0 then
    eventsMax = eventsMax or tonumber(redis.call('HGET', KEYS[1], 'eventsMax') or '10000')
    if seq > eventsMax then redis.call('XTRIM', KEYS[5], 'MAXLEN', '~', eventsMax) end
  end
  return seq
end

-- Epoch ms as ISO 8601 UTC, as JavaScript writes it (`toISOString`): the date from the day count
-- by the civil-from-days algorithm (H. Hinnant).
local function isoOf(ms)
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local rem = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(rem / 3600),
    math.floor(rem % 3600 / 60), rem % 60, ms % 1000)
end

-- The script's instant (its events' timestamp) as ISO 8601.
local function isoNow()
  if not eventTs then
    local t = redis.call('TIME')
    eventTs = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  return isoOf(tonumber(eventTs))
end

-- The keys (indexes into KEYS) a script may create, for keepTtl; nil: any of 2..6. Meta, live,
-- events and aux exist from create-run (or resume-run, replan) until the run settles, created with
-- the run's TTL, and a script writes live only while the run is not settled: a script that writes
-- no other key sets `ttlKeys = {}`, one that may create `nodes` `{3}`.
local ttlKeys
-- Gives the run's keys that have no TTL the one its hash has (none when the hash has none).
local function keepTtl()
  local ttl
  for _, i in ipairs(ttlKeys or { 2, 3, 4, 5, 6 }) do
    if redis.call('PTTL', KEYS[i]) == -1 then
      ttl = ttl or redis.call('PTTL', KEYS[1])
      if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) end
    end
  end
end

-- The run's place in its tenant's search indexes (keys.ts, runSearchKeys): sorted sets of run ids
-- by creation time (ms), named from the base the run recorded at creation in its hash's `index`,
-- {base, id, score, keepMs}. A child run, or a run made before the indexes, has none (nil). With
-- the index of queued runs (create-run on one Redis only, start-run; named in their ARGV) these
-- are the only keys a run script writes outside the run's hash tag. On one Redis the script writes
-- them in the same step as the run; on a Redis Cluster (INDEX_DEFERRED, set by scripts.ts) they are
-- in other slots, so the script only lists the writes in `indexWrites` and returns them beside its
-- result, and the store makes them just after (see docs/execution-model.md#redis-keys).
local indexWrites = {}
local function searchIndex()
  local raw = redis.call('HGET', KEYS[1], 'index')
  if not raw then return nil end
  return cjson.decode(raw)
end

-- Adds the run to the index `<base><suffix>`. Every write trims it by score of the runs that can no
-- longer exist (created more than keepMs before this one) and gives it keepMs to live, so a set
-- holds at most the runs still kept.
local function indexAdd(ix, suffix)
  local key = ix.base .. suffix
  if INDEX_DEFERRED then
    indexWrites[#indexWrites + 1] = { 'add', key, ix.score, ix.id, ix.keepMs }
    return
  end
  redis.call('ZADD', key, ix.score, ix.id)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', ix.score - ix.keepMs))
  redis.call('PEXPIRE', key, ix.keepMs)
end

-- Takes `id` off the index `key`.
local function indexRem(key, id)
  if INDEX_DEFERRED then
    indexWrites[#indexWrites + 1] = { 'rem', key, id }
  else
    redis.call('ZREM', key, id)
  end
end

-- Puts `id` in the sorted set `key` at `score`, as it is (no trim, no TTL: `key` holds what is
-- taken off it), e.g. a started run among the run deadlines.
local function indexSet(key, score, id)
  if INDEX_DEFERRED then
    indexWrites[#indexWrites + 1] = { 'set', key, score, id }
  else
    redis.call('ZADD', key, score, id)
  end
end

-- Sets the run's status, moving it from its old status's index to the new one's.
local function setStatus(status)
  local old = redis.call('HGET', KEYS[1], 'status')
  redis.call('HSET', KEYS[1], 'status', status)
  if old == status then return end
  local ix = searchIndex()
  if not ix then return end
  if old then indexRem(ix.base .. ':status:' .. old, ix.id) end
  indexAdd(ix, ':status:' .. status)
end

-- The status of a snapshot as stored: its JSON begins with it (run-store.ts writes it first).
local function snapshotStatus(json)
  return string.match(json, '^{"status":"(%a+)"')
end

-- Counts a snapshot written (by 1) or dropped (by -1) under its status, for the node counts a search
-- lists. A count never goes below 0 (a snapshot written before the counts were kept).
local function countNode(status, by)
  if not status then return nil end
  local field = 'count:' .. status
  if by < 0 and tonumber(redis.call('HGET', KEYS[6], field) or '0') <= 0 then return 0 end
  return redis.call('HINCRBY', KEYS[6], field, by)
end

-- HMGET of `fields` (a list), a thousand at a time: unpack is bounded by Lua's stack.
local function hmgetList(key, fields)
  local values = {}
  for from = 1, #fields, 1000 do
    local part = redis.call('HMGET', key, unpack(fields, from, math.min(from + 999, #fields)))
    for i = 1, #part do values[from + i - 1] = part[i] end
  end
  return values
end

local function generation()
  return tonumber(redis.call('HGET', KEYS[1], 'generation') or '0')
end

-- Adds a usage charge (JSON object of integers) to the run's usage counters.
local function charge(json)
  for k, v in pairs(cjson.decode(json)) do
    if v ~= 0 then redis.call('HINCRBY', KEYS[6], 'usage:' .. k, v) end
  end
end

-- Model tokens used so far (prompt + completion).
local function tokens()
  return tonumber(redis.call('HGET', KEYS[6], 'usage:promptTokens') or '0')
    + tonumber(redis.call('HGET', KEYS[6], 'usage:completionTokens') or '0')
end

-- Drops what a node's earlier executions left: snapshot and per-node bookkeeping (resume, replan).
local function forgetNode(id)
  local snapshot = redis.call('HGET', KEYS[3], id)
  -- A map's item (`<map>[<i>]`: no node id holds '[') was never counted.
  if snapshot and not string.find(id, '[', 1, true) then countNode(snapshotStatus(snapshot), -1) end
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[6], 'execs:' .. id, 'attempts:' .. id, 'progress:' .. id, 'iterations:' .. id, 'waitUntil:' .. id,
    'woke:' .. id)
end

-- Sets the run's outcome unless one is set (the first decision wins) and, for any outcome other
-- than succeeded, publishes the run id on the abort channel so workers abort its nodes.
-- Returns true when this call decided.
local function decideRun(status, errorJson, decidedAt, abortChannel, runId)
  local current = redis.call('HGET', KEYS[1], 'status')
  if current ~= 'queued' and current ~= 'running' then return false end
  setStatus(status)
  redis.call('HSET', KEYS[1], 'decidedAt', decidedAt)
  if errorJson ~= '' then redis.call('HSET', KEYS[1], 'error', errorJson) end
  emit('run.decided', '', '{"status":"' .. status .. '"}')
  if status ~= 'succeeded' then redis.call('PUBLISH', abortChannel, runId) end
  return true
end

-- Closes the run: finishedAt and output set, live states dropped, the final event appended, every
-- key given the retention TTL, the settled channel told. The caller checks it was not settled.
local function settleRun(finishedAt, outputJson, ttl, settledChannel, runId, finalJson)
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[1], 'finishedAt', finishedAt)
  if outputJson ~= '' then redis.call('HSET', KEYS[1], 'output', outputJson) end
  emit('run.finished', '', finalJson)
  for i = 1, 6 do redis.call('EXPIRE', KEYS[i], ttl) end
  redis.call('PUBLISH', settledChannel, runId)
end

-- Hands a running task run (not loop mode) of `gen` back to the plan loop with `failureJson`.
-- Returns 1 when the replan is requested (now or before), 0 when it cannot be: the run is not a
-- running task run of that generation, or its replans are used up.
local function requestReplan(failureJson, gen)
  if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
  if gen ~= generation() then return 0 end
  if not redis.call('HGET', KEYS[1], 'task') or redis.call('HGET', KEYS[1], 'mode') == 'loop' then return 0 end
  if redis.call('HEXISTS', KEYS[1], 'replan') == 1 then return 1 end
  local allowed = tonumber(redis.call('HGET', KEYS[1], 'maxReplans') or '0')
  if tonumber(redis.call('HGET', KEYS[1], 'replans') or '0') >= allowed then return 0 end
  redis.call('HSET', KEYS[1], 'replan', failureJson)
  emit('replan.requested', '', failureJson)
  return 1
end

-- Reads what node `id` (of a job of generation `gen`) needs before it runs and marks it running:
-- begin-node-6.lua's step, which complete-node-6.lua also takes for the node its job runs next (node
-- handoff), so a hop costs one script. `live`: its running state (JSON); `count`: count this as an
-- execution (loop suspicion) and announce it; `chargeCall`: charge one tool call; `reads`: ids whose
-- snapshots to read; `quiet`: announce nothing (a map's item: its map reports progress instead).
-- Answers as begin-node-6.lua does.
local function beginNode(id, gen, live, count, chargeCall, reads, quiet)
  local meta = redis.call('HMGET', KEYS[1], 'generation', 'status', 'deadlineAt', 'budget', 'eventsMax',
    'replan', 'envVersion', 'planEnvVersion')
  if tonumber(gen) < tonumber(meta[1] or '0') then return { 'stale' } end
  local status = meta[2]
  eventsMax = tonumber(meta[5] or '10000')
  local aux = redis.call('HMGET', KEYS[6], 'execs:' .. id, 'usage:toolCalls', 'usage:toolTimeMs',
    'attempts:' .. id, 'progress:' .. id, 'usage:promptTokens', 'usage:completionTokens', 'usage:costNanoUsd')
  -- The node's own snapshot, then those of the nodes it reads.
  local fields = { id }
  for _, read in ipairs(reads) do fields[#fields + 1] = read end
  local snapshots = hmgetList(KEYS[3], fields)
  local own = snapshots[1]
  -- A node of a plan made before its session's environment moved does not start while the run waits
  -- to be replanned for it: the new plan runs it (or does without it). One already started (a retry,
  -- a parked node coming back) goes on; its result may be reused by the new plan.
  -- Nor does one of a window whose cycle budget ran out (`cycle_budget`): what the window did not
  -- start goes back to the planner. A map's item (`quiet`) always goes on: its map has started.
  if status == 'running' and meta[6] and not own and not quiet then
    local seen = tonumber(meta[7] or '0')
    local planned = tonumber(meta[8] or '0')
    local budget = string.find(meta[6], '"code":"cycle_budget"', 1, true)
    local current = redis.call('HGET', KEYS[4], id)
    if (seen > planned or budget) and (not current or string.find(current, '"status":"queued"', 1, true)) then
      if budget then
        emit('node.deferred', id, cjson.encode({ reason = 'cycle_budget' }))
      else
        emit('node.deferred', id, cjson.encode({
          reason = 'environment_changed', planEnvironmentVersion = planned, environmentVersion = seen,
        }))
      end
      return { 'stale' }
    end
  end
  local execs = tonumber(aux[1] or '0')
  local calls = tonumber(aux[2] or '0')
  if status == 'running' and not own then
    if count then execs = redis.call('HINCRBY', KEYS[6], 'execs:' .. id, 1) end
    if chargeCall then calls = redis.call('HINCRBY', KEYS[6], 'usage:toolCalls', 1) end
    redis.call('HSET', KEYS[4], id, live)
    if count and not quiet then emit('node.started', id, live) end
    if chargeCall and not quiet then emit('tool.start', id, '') end
  end
  local result = {
    status or false,
    own or false,
    execs,
    calls,
    tonumber(aux[3] or '0'),
    aux[4] or false,
    aux[5] or false,
    meta[3] or false,
    meta[4] or false,
    tonumber(aux[6] or '0') + tonumber(aux[7] or '0'),
    tonumber(aux[8] or '0'),
  }
  for i = 2, #fields do
    result[#result + 1] = snapshots[i] or false
  end
  return result
end
