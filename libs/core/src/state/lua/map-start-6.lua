--[[
  Starts (or finds started) one execution of a map node's items and answers the items to enqueue:
  the first unfinished item of each lane (lane l holds items l, l + c, l + 2c, … for concurrency c;
  an item's completion starts the next item of its lane, complete-item-6.lua).
  ARGV[1] map node id, ARGV[2] generation of the map's job, ARGV[3] concurrency, ARGV[4] fingerprint
  of the map and its items (a new one drops every item snapshot), ARGV[5] '1' when the first failed
  item stops the map, ARGV[6..] the items' JSON, in order
  Returns { run status | false, index, item JSON, index, item JSON, … }; items only while the run
  is running in this generation.
  Item `i` of map `m` is the node `m[i]`: its snapshot in `nodes`, its execution count and attempts
  in `aux` like any node's, and `aux` `item:m[i]` holds its value until it completes. The map's
  state is one `aux` field, `map:m` (JSON {g, fp, total, c, stop, stopped, done, failed, launched,
  at, started}; `at` is the last `map.progress`, `started` this execution's start, epoch ms). A new
  execution (first, resume, replan) keeps the succeeded items of an execution with the
  same fingerprint and drops every other item snapshot; a redelivered map job (same generation and
  fingerprint) changes nothing and answers the lanes' heads again (adding their jobs is a no-op).
]]
ttlKeys = {}
local id = ARGV[1]
local gen = tonumber(ARGV[2])
local c = tonumber(ARGV[3])
local fp = ARGV[4]
local total = #ARGV - 5
local meta = redis.call('HMGET', KEYS[1], 'status', 'generation', 'eventsMax')
if not meta[1] then return { false } end
if meta[1] ~= 'running' or gen ~= tonumber(meta[2] or '0') then return { meta[1] } end
eventsMax = tonumber(meta[3] or '10000')
local function itemKey(i) return id .. '[' .. i .. ']' end
local fields = {}
for i = 0, total - 1 do fields[i + 1] = itemKey(i) end
local snaps = total > 0 and hmgetList(KEYS[3], fields) or {}
local raw = redis.call('HGET', KEYS[6], 'map:' .. id)
local state = raw and cjson.decode(raw) or nil
local fresh = not state or state.g ~= gen or state.fp ~= fp
if fresh then
  local keep = state ~= nil and state.fp == fp
  local drop = {}
  local done = 0
  for i = 1, total do
    local s = snaps[i]
    if s and keep and snapshotStatus(s) == 'succeeded' then
      done = done + 1
    elseif s then
      drop[#drop + 1] = fields[i]
      snaps[i] = false
    end
  end
  for i = total, (state and state.total or 0) - 1 do drop[#drop + 1] = itemKey(i) end
  for _, f in ipairs(drop) do
    redis.call('HDEL', KEYS[3], f)
    redis.call('HDEL', KEYS[6], 'execs:' .. f, 'attempts:' .. f, 'item:' .. f)
  end
  -- Values of the items still to run, so a lane's next item can be enqueued with its value.
  local values = {}
  for i = 1, total do
    if not snaps[i] then
      values[#values + 1] = 'item:' .. fields[i]
      values[#values + 1] = ARGV[5 + i]
    end
  end
  for from = 1, #values, 1000 do
    redis.call('HSET', KEYS[6], unpack(values, from, math.min(from + 999, #values)))
  end
  state = { g = gen, fp = fp, total = total, c = c, stop = ARGV[5] == '1', stopped = false,
    done = done, failed = 0, launched = done, at = 0 }
end
local result = { meta[1] }
if not state.stopped then
  for lane = 0, math.min(c, total) - 1 do
    local i = lane
    while i < total and snaps[i + 1] do i = i + c end
    if i < total then
      result[#result + 1] = i
      result[#result + 1] = ARGV[6 + i]
    end
  end
end
if fresh then
  state.launched = state.done + (#result - 1) / 2
  local t = redis.call('TIME')
  state.at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  state.started = state.at
  emit('map.progress', id, cjson.encode({ done = state.done, failed = 0,
    running = state.launched - state.done, total = total }))
  redis.call('HSET', KEYS[6], 'map:' .. id, cjson.encode(state))
end
return result
