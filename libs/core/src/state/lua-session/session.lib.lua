--[[
  The library every session script shares (prepended when the scripts load). The session's keys are
  always KEYS[1] meta, KEYS[2] queue, KEYS[3] buffer, KEYS[4] transcript, KEYS[5] env. The caller
  appends two arguments to every session script's own: the idle TTL (ms) and the transcript cap
  (lines); the script's body runs, then `touch()` gives every key of the session the idle TTL, so a
  session that nobody writes to expires whole, and each write keeps it alive in the same step.

  Transcript lines keep their number for the session's life: `trimmed` in the session hash counts the
  oldest lines dropped by the cap, so line n is at list index n - trimmed and the transcript's
  length (in line numbers) is trimmed + LLEN.
]]
local IDLE_TTL_MS = tonumber(ARGV[#ARGV - 1])
local MAX_LINES = tonumber(ARGV[#ARGV])

local function trimmed()
  return tonumber(redis.call('HGET', KEYS[1], 'trimmed') or '0')
end

-- The number the next transcript line gets.
local function transcriptLength()
  return trimmed() + redis.call('LLEN', KEYS[4])
end

-- Appends transcript lines and drops the oldest past the cap (counted in `trimmed`). Pushed 1000 at
-- a time: unpack has a limit on how many values it returns.
local function appendLines(lines)
  if #lines == 0 then return end
  local n = 0
  for i = 1, #lines, 1000 do
    n = redis.call('RPUSH', KEYS[4], unpack(lines, i, math.min(i + 999, #lines)))
  end
  if n > MAX_LINES then
    redis.call('LTRIM', KEYS[4], n - MAX_LINES, -1)
    redis.call('HINCRBY', KEYS[1], 'trimmed', n - MAX_LINES)
  end
end

-- Notes `id` in the sorted set `seen` (score: now) unless it is there from within the last `window`
-- ms: true when it was not (the caller goes on), false when it was (a repeat). Ids older than the
-- window are dropped, at most MAX_LINES ids are kept (the newest), and the set lives the window.
local function once(seen, id, now, window)
  redis.call('ZREMRANGEBYSCORE', seen, '-inf', '(' .. (tonumber(now) - window))
  if redis.call('ZSCORE', seen, id) then return false end
  redis.call('ZADD', seen, now, id)
  redis.call('ZREMRANGEBYRANK', seen, 0, -MAX_LINES - 1)
  redis.call('PEXPIRE', seen, window)
  return true
end

-- Gives every existing key of the session the idle TTL.
local function touch()
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], IDLE_TTL_MS) end
end
