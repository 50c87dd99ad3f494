--[[
  Appends lines to a session's transcript (oldest dropped past the cap), creating the session when
  new, and optionally sets or clears its default lane mode in the same step.
  KEYS: meta, queue, buffer, transcript, env. ARGV[1] now (epoch ms), ARGV[2] mode: '' leaves it,
  '-' clears it, else the mode to set; ARGV[3 .. #ARGV-2] the lines (JSON); then the idle TTL and
  the transcript cap (see session.lib.lua).
  Returns the transcript's length (in line numbers) after the append.
]]
redis.call('HSETNX', KEYS[1], 'createdAt', ARGV[1])
if ARGV[2] == '-' then
  redis.call('HDEL', KEYS[1], 'mode')
elseif ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'mode', ARGV[2])
end
local lines = {}
for i = 3, #ARGV - 2 do lines[#lines + 1] = ARGV[i] end
appendLines(lines)
return transcriptLength()
