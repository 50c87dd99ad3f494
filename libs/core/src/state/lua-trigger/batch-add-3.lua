--[[
  Adds one event to a trigger's pending batch, once, and says which flushes to schedule: a
  `timer:<n>` flush when the batch was empty (it runs maxWaitMs later), a `now:<n>` flush each time
  the batch holds a multiple of maxSize events. Each flush takes at most maxSize events, so pending
  events never outnumber maxSize × the flushes still to run. The decision is kept on the event, so
  a redelivered job schedules the same flushes (same job ids: BullMQ adds each once) and never adds
  the event twice.
  KEYS[1] the event's hash   KEYS[2] the batch's sorted set (event JSON by seq)
  KEYS[3] the batch's flush counter
  ARGV[1] the trigger id   ARGV[2] the event JSON   ARGV[3] its seq   ARGV[4] maxSize
  ARGV[5] most pending events   ARGV[6] the batch's TTL (ms)
  Returns the decision: `dropped` (the batch is full), `-` (nothing to schedule), or the flushes
  joined by commas.
]]
local field = 'b:' .. ARGV[1]
local done = redis.call('HGET', KEYS[1], field)
if done then return done end
local decision = '-'
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  decision = 'dropped'
else
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
  local len = redis.call('ZCARD', KEYS[2])
  if len % tonumber(ARGV[4]) == 0 then
    decision = 'now:' .. redis.call('INCR', KEYS[3])
  elseif len == 1 then
    decision = 'timer:' .. redis.call('INCR', KEYS[3])
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
redis.call('HSET', KEYS[1], field, decision)
return decision
