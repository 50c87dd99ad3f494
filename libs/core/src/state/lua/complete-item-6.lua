--[[
  Records a map item's snapshot (once) and answers the next item of its lane to enqueue.
  ARGV[1] map node id, ARGV[2] item index, ARGV[3] snapshot JSON, ARGV[4] generation of the item's
  job, ARGV[5] usage to charge (JSON object of integers), ARGV[6] `map.item.failed` event data JSON
  for a failed item, else ''
  Returns { written (1 = this call wrote it), run status | false, generation, next index | false,
  its item JSON | false }.
  The item counts toward the map's state (`map:<id>` in aux, see map-start-6.lua); items append no
  event of their own but `map.item.failed`, and `map.progress` {done, failed, running, total} is
  appended at most every 500 ms (and when the last item is in). The next item of the lane is the
  first after this one (by the map's concurrency) without a snapshot; none while the run is not
  running, in another generation, or after a failed item stopped the map. On a redelivery
  (written = 0) nothing is counted again but the next item is answered again, so a crash between
  this script and the enqueue cannot strand the lane; its job id is deterministic.
  Of the run's keys it may create only `nodes`.
]]
ttlKeys = { 3 }
local id = ARGV[1]
local index = tonumber(ARGV[2])
local jobGen = tonumber(ARGV[4])
local key = id .. '[' .. index .. ']'
local meta = redis.call('HMGET', KEYS[1], 'status', 'generation', 'eventsMax')
local status = meta[1]
-- A run that expired or was deleted gets no keys back from a late item.
if not status then return { 0, false, 0, false, false } end
eventsMax = tonumber(meta[3] or '10000')
local gen = tonumber(meta[2] or '0')
local raw = redis.call('HGET', KEYS[6], 'map:' .. id)
local state = raw and cjson.decode(raw) or nil
local written = redis.call('HSETNX', KEYS[3], key, ARGV[3])
local result = { written, status, gen, false, false }
local current = state ~= nil and state.g == jobGen
if written == 1 then
  redis.call('HDEL', KEYS[4], key)
  redis.call('HDEL', KEYS[6], 'item:' .. key)
  charge(ARGV[5])
  if ARGV[6] ~= '' then emit('map.item.failed', id, ARGV[6]) end
  if current then
    state.done = state.done + 1
    if ARGV[6] ~= '' then
      state.failed = state.failed + 1
      if state.stop then state.stopped = true end
    end
  end
end
if not current then return result end
if status == 'running' and gen == jobGen and not state.stopped then
  local j = index + state.c
  while j < state.total and redis.call('HEXISTS', KEYS[3], id .. '[' .. j .. ']') == 1 do j = j + state.c end
  if j < state.total then
    if written == 1 then state.launched = state.launched + 1 end
    result[4] = j
    result[5] = redis.call('HGET', KEYS[6], 'item:' .. id .. '[' .. j .. ']') or false
  end
end
if written == 1 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now - state.at >= 500 or state.done >= state.total then
    state.at = now
    emit('map.progress', id, cjson.encode({ done = state.done, failed = state.failed,
      running = state.launched - state.done, total = state.total }))
  end
  redis.call('HSET', KEYS[6], 'map:' .. id, cjson.encode(state))
end
return result
