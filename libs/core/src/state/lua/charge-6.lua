--[[
  Charges usage that belongs to no node (the planner's model calls) and appends an event.
  ARGV[1] usage (JSON object of integers), ARGV[2] event type or '', ARGV[3] event data JSON or ''
  Returns 1, or 0 for an unknown run.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
charge(ARGV[1])
if ARGV[2] ~= '' then emit(ARGV[2], '', ARGV[3]) end
return 1
