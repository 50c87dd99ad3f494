--[[
  Appends one event to the run's stream (for events that change no state, e.g. streamed text).
  ARGV[1] event type, ARGV[2] node id or '', ARGV[3] data JSON or ''
  Returns the event's seq, or 0 for an unknown run.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return emit(ARGV[1], ARGV[2], ARGV[3])
