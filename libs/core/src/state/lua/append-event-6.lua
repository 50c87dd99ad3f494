--[[
  Appends one event to the run's stream (for events that change no state, e.g. streamed text).
  ARGV[1] event type, ARGV[2] node id or '', ARGV[3] data JSON or '', ARGV[4] '' or the most events
  of this type the node may append in the run, across its attempts and the workers that ran them:
  counted in aux (`cap:<type>:<node>`, written only for a node that appends such an event; aux
  lives as long as the run).
  Returns the event's seq; 0 for an unknown run, -1 for an event past the node's bound (dropped).
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local bound = tonumber(ARGV[4])
if bound and redis.call('HINCRBY', KEYS[6], 'cap:' .. ARGV[1] .. ':' .. ARGV[2], 1) > bound then
  return -1
end
return emit(ARGV[1], ARGV[2], ARGV[3])
