--[[
  Adds one record to a tenant's registry (its webhook subscriptions, triggers or schedules) within
  the tenant's cap on how many it holds. One script, so two concurrent creations cannot both pass
  the count check.
  KEYS[1] the registry hash (id → record JSON)
  ARGV[1] the new record's id (random: never one that exists)
  ARGV[2] its record JSON
  ARGV[3] the most records the tenant may hold
  Returns 1 when added, 0 when the tenant is at its cap.
]]
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
