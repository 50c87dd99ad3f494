--[[
  Marks a debounce key's events up to seq as consumed by a run, never moving the mark back.
  KEYS[1] the debounce key's hash   ARGV[1] the seq the run consumed
  Returns 1.
]]
local done = tonumber(redis.call('HGET', KEYS[1], 'done') or '-1')
if tonumber(ARGV[1]) > done then redis.call('HSET', KEYS[1], 'done', ARGV[1]) end
return 1
