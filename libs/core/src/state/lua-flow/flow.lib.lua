--[[
  Flow control's shared steps (prepended to every script in this folder). Every script takes the
  first keys of this list, as many as its file name says (built by `flowKeys` in keys.ts):
    KEYS[1] B, the base every counter's and member's keys are named from (`<prefix>:flow:{f}`)
    KEYS[2] set: the counters with waiters
    KEYS[3] zset: members granted capacity but not yet running, by when they were last woken
    KEYS[4] hash: the calling member's record (B:m:<m>, below)
    KEYS[5] zset: counter -> when it was last used
  All flow keys share the hash tag `{f}`, so one script may take capacity on several counters at
  once, on one Redis Cluster slot. The keys of counters and of other members are learned only at
  run time (a call's counters come in ARGV, and a waiter's from its record; the members from the
  queues and KEYS[3]), so the steps below name them from B (`kk`, `mk`), in that same slot.

  Per counter k (`<limit>=<value>`):
    B:k:<k>            hash: concurrency, requests, tokens, interval, adaptive (the limit as last
                       seen), factor (adaptive scale, 1 = the limit), pausedUntil, lastCut, seq,
                       logTokens (tokens reserved inside the interval)
    B:k:<k>:inflight   zset: member -> lease expiry (calls in flight)
    B:k:<k>:log        zset: reservation -> when its call ended (or the latest it may end):
                       calls inside the sliding interval
    B:k:<k>:cost       hash: reservation -> tokens
    B:k:<k>:prios      zset of the priorities with waiters
    B:k:<k>:ring:<p>   list: the fair-share groups with waiters at priority p, next first
    B:k:<k>:q:<p>:<g>  list: group g's waiting members at priority p, oldest first
  Per member m (a node job): B:m:<m> hash: keys, groups, w (tokens), prio, state
  (waiting | granted | held), on (the counter it waits on), since, grantedAt, resv.
]]
local B = KEYS[1]
local DAY = 86400000
local WAITING = KEYS[2]
local GRANTED = KEYS[3]
local function kk(k, suffix) return B .. ':k:' .. k .. (suffix or '') end
local function mk(m) return B .. ':m:' .. m end

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function cfgOf(k)
  local v = redis.call('HMGET', kk(k), 'concurrency', 'requests', 'tokens', 'interval', 'factor', 'pausedUntil')
  return {
    c = tonumber(v[1]) or 0, r = tonumber(v[2]) or 0, t = tonumber(v[3]) or 0,
    i = tonumber(v[4]) or 60000, f = tonumber(v[5]) or 1, p = tonumber(v[6]) or 0,
  }
end

-- A limit as the adaptive factor scales it; never below one.
local function scaled(n, f) return math.max(1, math.floor(n * f)) end

-- Drops leases past their expiry and reservations older than the interval.
local function expire(k, c, now)
  redis.call('ZREMRANGEBYSCORE', kk(k, ':inflight'), '-inf', now)
  local log = kk(k, ':log')
  while true do
    local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - c.i, 'LIMIT', 0, 500)
    if #old == 0 then return end
    local costs = redis.call('HMGET', kk(k, ':cost'), unpack(old))
    local sum = 0
    for _, x in ipairs(costs) do sum = sum + (tonumber(x) or 0) end
    redis.call('ZREM', log, unpack(old))
    redis.call('HDEL', kk(k, ':cost'), unpack(old))
    if sum ~= 0 then redis.call('HINCRBY', kk(k), 'logTokens', -sum) end
  end
end

-- 0 when a call of w tokens (of member m, when given) fits counter k now; else ms until it may
-- (-1: when a call ends). A member's own slot (its job redelivered mid-call) does not hold it back.
local function blocked(k, c, w, now, m)
  if c.p > now then return c.p - now end
  if c.c > 0 then
    local n = redis.call('ZCARD', kk(k, ':inflight'))
    if m and redis.call('ZSCORE', kk(k, ':inflight'), m) then n = n - 1 end
    if n >= scaled(c.c, c.f) then return -1 end
  end
  local log = kk(k, ':log')
  if c.r > 0 then
    local cap = scaled(c.r, c.f)
    local n = redis.call('ZCARD', log)
    if n >= cap then
      -- The call fits once the (n - cap + 1) oldest reservations have left the interval.
      local e = redis.call('ZRANGE', log, n - cap, n - cap, 'WITHSCORES')
      -- A call still running leaves the interval an interval after it ends: not known yet.
      local at = tonumber(e[2])
      if not at or at > now then return -1 end
      return math.max(1, at + c.i - now)
    end
  end
  if c.t > 0 and w > 0 then
    local cap = scaled(c.t, c.f)
    -- A call larger than the whole interval's tokens waits for an empty interval.
    local need = math.min(w, cap)
    local used = tonumber(redis.call('HGET', kk(k), 'logTokens') or '0')
    if used + need > cap then
      local entries = redis.call('ZRANGE', log, 0, 999, 'WITHSCORES')
      local ids = {}
      for i = 1, #entries, 2 do ids[#ids + 1] = entries[i] end
      if #ids > 0 then
        local costs = redis.call('HMGET', kk(k, ':cost'), unpack(ids))
        for i, id in ipairs(ids) do
          used = used - (tonumber(costs[i]) or 0)
          local at = tonumber(entries[2 * i])
          if not at or at > now then return -1 end
          if used + need <= cap then return math.max(1, at + c.i - now) end
        end
      end
      return c.i
    end
  end
  return 0
end

-- Takes one call's capacity on counter k; answers its reservation id ('' when k has no rate).
-- A reservation stays in the rate's interval from when it is taken until an interval after the
-- call ended (its score is the end: `now + lease` at most while the call may still run, the real
-- end once it is given back). So however late a call reaches the service after its reservation,
-- no interval at the service sees more calls or tokens than the limit.
local function take(k, c, m, w, now, lease)
  if c.c > 0 then redis.call('ZADD', kk(k, ':inflight'), now + lease, m) end
  if c.r == 0 and c.t == 0 then return '' end
  local id = m .. '#' .. redis.call('HINCRBY', kk(k), 'seq', 1)
  redis.call('ZADD', kk(k, ':log'), now + lease, id)
  if c.t > 0 and w > 0 then
    redis.call('HSET', kk(k, ':cost'), id, w)
    redis.call('HINCRBY', kk(k), 'logTokens', w)
  end
  return id
end

local function enqueue(k, m, group, prio)
  local ring = kk(k, ':ring:' .. prio)
  local q = kk(k, ':q:' .. prio .. ':' .. group)
  if redis.call('RPUSH', q, m) == 1 then redis.call('RPUSH', ring, group) end
  redis.call('ZADD', kk(k, ':prios'), prio, prio)
  redis.call('PEXPIRE', q, DAY)
  redis.call('PEXPIRE', ring, DAY)
  redis.call('PEXPIRE', kk(k, ':prios'), DAY)
  redis.call('SADD', WAITING, k)
  redis.call('PEXPIRE', WAITING, DAY)
  redis.call('HSET', mk(m), 'state', 'waiting', 'on', k)
end

-- The next waiter of counter k: highest priority first, round-robin across groups, oldest first
-- within a group. Entries of members gone or moved on are dropped on the way.
local function peek(k)
  for _ = 1, 1000 do
    local top = redis.call('ZRANGE', kk(k, ':prios'), 0, 0, 'REV')
    if #top == 0 then return nil end
    local prio = top[1]
    local ring = kk(k, ':ring:' .. prio)
    local group = redis.call('LINDEX', ring, 0)
    if not group then
      redis.call('ZREM', kk(k, ':prios'), prio)
    else
      local q = kk(k, ':q:' .. prio .. ':' .. group)
      local m = redis.call('LINDEX', q, 0)
      if not m then
        redis.call('LPOP', ring)
      else
        local st = redis.call('HMGET', mk(m), 'state', 'on')
        if st[1] == 'waiting' and st[2] == k then return m, prio, group end
        redis.call('LPOP', q)
      end
    end
  end
  return nil
end

-- Takes the head found by peek off its queue; its group goes to the back of the ring.
local function pop(k, prio, group)
  local ring = kk(k, ':ring:' .. prio)
  local q = kk(k, ':q:' .. prio .. ':' .. group)
  redis.call('LPOP', q)
  redis.call('LPOP', ring)
  if redis.call('LLEN', q) > 0 then redis.call('RPUSH', ring, group) end
end

-- Grants waiters of counter k while every counter of the next one has room (at most `budget`),
-- appending each granted member to `out`. A waiter held back by another of its counters moves to
-- that counter's queue.
local function grantOn(k, now, lease, out, budget)
  for _ = 1, budget do
    local c = cfgOf(k)
    if c.p > now then return end
    local m, prio, group = peek(k)
    if not m then
      redis.call('SREM', WAITING, k)
      return
    end
    local rec = redis.call('HMGET', mk(m), 'keys', 'groups', 'w')
    local ids = cjson.decode(rec[1])
    local groups = cjson.decode(rec[2])
    local w = tonumber(rec[3]) or 0
    local blocker = nil
    for _, k2 in ipairs(ids) do
      local c2 = cfgOf(k2)
      expire(k2, c2, now)
      if blocked(k2, c2, w, now) ~= 0 then
        blocker = k2
        break
      end
    end
    if blocker == k then return end
    pop(k, prio, group)
    if blocker then
      enqueue(blocker, m, groups[blocker] or '-', prio)
    else
      local resv = {}
      for _, k2 in ipairs(ids) do resv[k2] = take(k2, cfgOf(k2), m, w, now, lease) end
      redis.call('HSET', mk(m), 'state', 'granted', 'grantedAt', now, 'resv', cjson.encode(resv))
      redis.call('ZADD', GRANTED, now, m)
      redis.call('PEXPIRE', GRANTED, DAY)
      out[#out + 1] = m
    end
  end
end

-- Moves the end of member m's reservations to `at` (the latest the call may end, or when it did).
local function ends(m, at)
  local resv = redis.call('HGET', mk(m), 'resv')
  if not resv then return end
  for k, id in pairs(cjson.decode(resv)) do
    if id ~= '' then redis.call('ZADD', kk(k, ':log'), 'XX', at, id) end
  end
end

-- Gives back what member m holds on its counters and forgets it: its reservations end now (a
-- granted call never made as well) and leave the interval like any other.
local function drop(m)
  local rec = redis.call('HMGET', mk(m), 'keys', 'state')
  if rec[2] == 'granted' or rec[2] == 'held' then ends(m, clock()) end
  if rec[1] then
    for _, k in ipairs(cjson.decode(rec[1])) do redis.call('ZREM', kk(k, ':inflight'), m) end
  end
  redis.call('DEL', mk(m))
  redis.call('ZREM', GRANTED, m)
  return rec[1] and cjson.decode(rec[1]) or {}
end
