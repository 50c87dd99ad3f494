--[[
  One page of a session's transcript, by line number (see session.lib.lua: numbers survive the cap).
  KEYS: meta, queue, buffer, transcript, env. ARGV[1] the first line number wanted (from the oldest
  kept when before it, the end when past it), ARGV[2] most lines; then the idle TTL and the
  transcript cap (unused: a read writes nothing and keeps nothing alive).
  Returns { first line number kept, length, first line number returned, { lines… } }.
]]
local first = trimmed()
local length = first + redis.call('LLEN', KEYS[4])
local from = tonumber(ARGV[1])
if from < first then from = first end
if from > length then from = length end
local lines = {}
if from < length then
  lines = redis.call('LRANGE', KEYS[4], from - first, from - first + tonumber(ARGV[2]) - 1)
end
return { first, length, from, lines }
