--[[
  Stores one secret of a tenant, within the tenant's cap on how many secrets it holds. One script,
  so two concurrent writes of new names cannot both pass the count check.
  KEYS[1] the tenant's values hash (name → encrypted value)
  KEYS[2] the tenant's updated hash (name → ISO time of the last write)
  ARGV[1] the secret's name
  ARGV[2] its encrypted value
  ARGV[3] the time of this write (ISO)
  ARGV[4] the most secrets the tenant may hold
  Returns 1 when stored (new or replaced), 0 when the name is new and the tenant is at its cap.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
