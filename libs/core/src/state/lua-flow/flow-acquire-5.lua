--[[
  A call asks for capacity. KEYS[1] the flow base, KEYS[2] the counters with waiters, KEYS[3] the
  granted members, KEYS[4] the member's record, KEYS[5] the counters by last use (flow.lib.lua);
  the counters' keys are named from KEYS[1], as their number varies with the call.
  ARGV[1] member (the node job), ARGV[2] priority (1-10), ARGV[3] tokens it reserves, ARGV[4]
  lease ms (how long its capacity is held if it never says it ended), ARGV[5] JSON
  [{id, c, r, t, i, a, g}]: each counter with its limit and the call's fair-share group.
  A call takes capacity at once only when nobody waits on its counters; else it joins the queue of
  the first counter with waiters (or without room) and is granted in turn.
  Returns { 1, ms it waited in all, '', reservations, members granted meanwhile... } when it may go,
  or { 0, ms until it may (-1: unknown, when a call ends), the counter it waits on, '', members
  granted... }. A call that goes at once is not remembered: its reservations (JSON, counter →
  reservation id) come back for the release to hand in; otherwise they are kept with the member.
]]
local M, COUNTERS = KEYS[4], KEYS[5]
local now = clock()
local m, prio, w, lease = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local function touch(k)
  redis.call('ZADD', COUNTERS, now, k)
  -- The counter's keys live a day past their last use; renewed when half of that is gone.
  if redis.call('PTTL', kk(k)) < DAY / 2 then
    redis.call('PEXPIRE', COUNTERS, DAY)
    for _, s in ipairs({ '', ':inflight', ':log', ':cost', ':prios' }) do
      redis.call('PEXPIRE', kk(k, s), DAY)
    end
  end
end

local ids, groups = {}, {}
for i, d in ipairs(cjson.decode(ARGV[5])) do
  ids[i] = d.id
  groups[d.id] = d.g
  -- The limit as this process has it (limits may change while calls wait), when it changed.
  local seen = d.c .. '/' .. d.r .. '/' .. d.t .. '/' .. d.i .. '/' .. d.a
  if redis.call('HGET', kk(d.id), 'limit') ~= seen then
    redis.call('HSET', kk(d.id), 'limit', seen, 'concurrency', d.c, 'requests', d.r, 'tokens', d.t,
      'interval', d.i, 'adaptive', d.a)
  end
  touch(d.id)
end
local idsJson = cjson.encode(ids)
local out = {}
local function others()
  local rest = {}
  for _, x in ipairs(out) do if x ~= m then rest[#rest + 1] = x end end
  return rest
end
local function go(since)
  -- The call is made now: its reservations may run until its lease ends.
  ends(m, now + lease)
  redis.call('HSET', M, 'state', 'held')
  redis.call('ZREM', GRANTED, m)
  for _, k in ipairs(ids) do
    if redis.call('ZSCORE', kk(k, ':inflight'), m) then redis.call('ZADD', kk(k, ':inflight'), now + lease, m) end
  end
  return { 1, now - (since or now), '', '', unpack(others()) }
end
local function wait(k)
  local c = cfgOf(k)
  local head = peek(k)
  local ms = -1
  if head == m then ms = blocked(k, c, w, now) end
  if ms == 0 then ms = -1 end
  return { 0, ms, k, '', unpack(others()) }
end

local rec = redis.call('HMGET', M, 'state', 'since', 'on', 'keys')
local state, since = rec[1], tonumber(rec[2])
-- The same call again (a job redelivered or woken): carry on where it was.
if state and rec[4] == idsJson then
  if state == 'granted' or state == 'held' then return go(since) end
  if state == 'waiting' then
    grantOn(rec[3], now, lease, out, 50)
    if redis.call('HGET', M, 'state') == 'granted' then return go(since) end
    return wait(rec[3])
  end
end
-- Another call of the same job: what the last one held is given back first.
if state then drop(m) end
local function remember()
  redis.call('HSET', M, 'keys', idsJson, 'groups', cjson.encode(groups), 'w', w, 'prio', prio, 'since', now)
  redis.call('PEXPIRE', M, DAY)
end
for _, k in ipairs(ids) do
  if redis.call('SISMEMBER', WAITING, k) == 1 then
    remember()
    enqueue(k, m, groups[k], prio)
    grantOn(k, now, lease, out, 50)
    if redis.call('HGET', M, 'state') == 'granted' then return go(now) end
    return wait(k)
  end
end
for _, k in ipairs(ids) do
  local c = cfgOf(k)
  expire(k, c, now)
  local ms = blocked(k, c, w, now, m)
  if ms ~= 0 then
    remember()
    enqueue(k, m, groups[k], prio)
    return { 0, ms, k, '' }
  end
end
-- Nobody waits and every counter has room: the call goes, and nothing about it is kept but its
-- capacity (a lease and reservations that end by themselves).
local resv = {}
for _, k in ipairs(ids) do resv[k] = take(k, cfgOf(k), m, w, now, lease) end
return { 1, 0, '', cjson.encode(resv) }
