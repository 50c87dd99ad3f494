--[[
  Admits a message to a session's lane, once. KEYS: meta, queue, buffer, transcript, env, seen (the
  ids of the messages admitted within the dedupe window: a sorted set, member the id, score when it
  was admitted; not among the keys every session script touches, it lives the window).
  ARGV[1] now (epoch ms), ARGV[2] mode (followup|collect|steer|interrupt), ARGV[3] run id prepared
  for this message, ARGV[4] message JSON, ARGV[5] collect cap, ARGV[6] drop policy
  (summarize|old|new), ARGV[7] environment cap, ARGV[8] the message's id ('' for none), ARGV[9] the
  dedupe window (ms), ARGV[10] the message's transcript line (JSON; '' for none), ARGV[11] followup
  cap (runs waiting in the lane), ARGV[12] the message's content id ('' for none: a message with an
  `eventId` is known by it), ARGV[13] the content window (ms): the same content admitted within it
  is a double submission
  Then the idle TTL and the transcript cap (see session.lib.lua).
  Returns one of:
    { 'duplicate' }                 a message with this id was admitted within the window: nothing
                                    changes (a client's retry, a redelivered sense job, a command
                                    the Redis client re-sent after a reconnect)
    { 'start', runId }              the lane was idle: the message's run starts now
    { 'queued', runId, position }   followup: the run waits its turn
    { 'full', cap }                 followup with the followup cap of runs waiting: nothing changed
    { 'collected', position }       collect: merged into the next collected run
    { 'dropped' }                   collect with policy new and a full buffer
    { 'steered', runningRunId, version }  steer: written into the running run's environment
    { 'interrupt', oldRunId, runId }      interrupt: the old run is to be cancelled, this one starts
  The id, the transcript line and the lane's move are one step: a message is in the transcript and
  the lane together, or in neither, and whoever admits it a second time is told so.
]]
local now, mode, runId = ARGV[1], ARGV[2], ARGV[3]
local messageId, window, line, cap = ARGV[8], tonumber(ARGV[9]), ARGV[10], tonumber(ARGV[11])
local contentId, contentWindow = ARGV[12], tonumber(ARGV[13])
local running = redis.call('HGET', KEYS[1], 'running')
-- A followup its lane has no room for changes nothing (not even the record of its id), unless it
-- is a message admitted before.
if mode == 'followup' and running and running ~= '' then
  local waiting = redis.call('LLEN', KEYS[2])
  if redis.call('LPOS', KEYS[2], 'collect') then waiting = waiting - 1 end
  local admitted = messageId ~= '' and redis.call('ZSCORE', KEYS[6], messageId)
  if waiting >= cap and not admitted then return { 'full', cap } end
end
-- The same content again within its short window, in the same context (a `/new` starts another):
-- one message sent twice (a double click).
if contentId ~= '' then
  contentId = contentId .. '@' .. (redis.call('HGET', KEYS[1], 'contextId') or '1')
  local at = redis.call('ZSCORE', KEYS[6], contentId)
  if at and tonumber(at) >= tonumber(now) - contentWindow then return { 'duplicate' } end
end
if messageId ~= '' and not once(KEYS[6], messageId, now, window) then return { 'duplicate' } end
if contentId ~= '' then
  -- Kept as long as the ids beside it (trimmed by the longer window), judged by its own.
  redis.call('ZADD', KEYS[6], now, contentId)
  if redis.call('PTTL', KEYS[6]) < contentWindow then redis.call('PEXPIRE', KEYS[6], contentWindow) end
end
redis.call('HSETNX', KEYS[1], 'createdAt', now)
redis.call('HSETNX', KEYS[1], 'contextId', '1')
if line ~= '' then appendLines({ line }) end
if not running or running == '' then
  redis.call('HSET', KEYS[1], 'running', runId)
  return { 'start', runId }
end
if mode == 'followup' then
  -- The queue holds waiting runs and at most one collect marker.
  local position = redis.call('RPUSH', KEYS[2], runId)
  return { 'queued', runId, position }
end
if mode == 'collect' then
  local n = redis.call('LLEN', KEYS[3])
  if n >= tonumber(ARGV[5]) then
    if ARGV[6] == 'new' then return { 'dropped' } end
    local oldest = redis.call('LPOP', KEYS[3])
    if ARGV[6] == 'summarize' then
      -- Fold the oldest message into the next one, so the run still hears of it.
      local next = redis.call('LPOP', KEYS[3])
      local a = cjson.decode(oldest)
      local b = next and cjson.decode(next) or nil
      local merged = { text = a.text .. (b and ('\n' .. b.text) or ''), receivedAt = a.receivedAt, summarized = (a.summarized or 1) + (b and (b.summarized or 1) or 0) }
      redis.call('LPUSH', KEYS[3], cjson.encode(merged))
    end
  end
  redis.call('RPUSH', KEYS[3], ARGV[4])
  redis.call('HSET', KEYS[1], 'lastCollectAt', now)
  local position = redis.call('LPOS', KEYS[2], 'collect')
  if not position then position = redis.call('RPUSH', KEYS[2], 'collect') - 1 end
  return { 'collected', position + 1 }
end
if mode == 'steer' then
  local version = redis.call('HINCRBY', KEYS[1], 'envVersion', 1)
  redis.call('RPUSH', KEYS[5], ARGV[4])
  redis.call('LTRIM', KEYS[5], -tonumber(ARGV[7]), -1)
  return { 'steered', running, version }
end
-- interrupt
redis.call('HSET', KEYS[1], 'running', runId)
return { 'interrupt', running, runId }
