--[[
  Puts one item into a tenant's store within the tenant's cap on how many items it holds: a new
  item past the cap is refused, an existing one is replaced (keeping when it was created). One
  script, so two concurrent puts cannot both pass the count check.
  KEYS[1] the tenant's item hash (field → record)
  ARGV[1] the item's field (`JSON.stringify([namespace, key])`)
  ARGV[2] the item's value, as JSON
  ARGV[3] now, an ISO time
  ARGV[4] the most items the tenant may hold
  Returns 1 when created, 0 when replaced, -1 when the tenant is at its cap.
  A record is `{"created_at":"…","updated_at":"…","value":…}`, written here, so its creation time
  is read back by pattern without decoding the value.
]]
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
local created = ARGV[3]
if old then created = string.match(old, '^{"created_at":"([^"]*)"') or ARGV[3] end
redis.call('HSET', KEYS[1], ARGV[1],
  '{"created_at":"' .. created .. '","updated_at":"' .. ARGV[3] .. '","value":' .. ARGV[2] .. '}')
if old then return 0 end
return 1
