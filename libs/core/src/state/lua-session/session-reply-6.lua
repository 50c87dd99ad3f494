--[[
  Writes a settled session run's reply to the transcript, once. KEYS: meta, queue, buffer,
  transcript, env, seen (see lane-admit-6.lua).
  ARGV[1] now (epoch ms), ARGV[2] the reply's id (`reply:<runId>`), ARGV[3] the dedupe window (ms),
  ARGV[4 .. #ARGV-2] the lines (JSON); then the idle TTL and the transcript cap (see session.lib.lua).
  Returns 1 when the lines were appended, 0 when a reply with this id was written within the window
  (a pass that comes again: the root job handed out again, the lane sweep, a crash after the write
  and before the run was marked replied).
]]
if not once(KEYS[6], ARGV[2], ARGV[1], tonumber(ARGV[3])) then return 0 end
redis.call('HSETNX', KEYS[1], 'createdAt', ARGV[1])
local lines = {}
for i = 4, #ARGV - 2 do lines[#lines + 1] = ARGV[i] end
appendLines(lines)
return 1
