--[[
  Gives back a settled run's slot (and takes it off the waiting list), and names the runs to wake.
  KEYS[1] the tenant's running runs, KEYS[2] its waiting runs (see acquire-slot-2)
  ARGV[1] run id (or '' to only look), ARGV[2] the tenant's cap, ARGV[3] how many waiting runs to
  name beyond the free slots (some may be gone)
  Returns { free slots, waiting run ids oldest first (at most free + ARGV[3]) }. Safe to repeat.
]]
if ARGV[1] ~= '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
if free <= 0 then return { 0, {} } end
return { free, redis.call('ZRANGE', KEYS[2], 0, free - 1 + tonumber(ARGV[3])) }
