--[[
  Stores one secret of a tenant with its scope, within the tenant's cap on how many secrets it
  holds. One script, so two concurrent writes of new names cannot both pass the count check, and a
  value never lands without the scope that says where it may go.
  KEYS[1] the tenant's values hash (name → encrypted value)
  KEYS[2] the tenant's updated hash (name → ISO time of the last write)
  KEYS[3] the tenant's scopes hash (name → JSON {"hosts": [...], "tools": [...]})
  ARGV[1] the secret's name
  ARGV[2] its encrypted value, or "" to keep the stored value and change only the scope
  ARGV[3] the time of this write (ISO)
  ARGV[4] the most secrets the tenant may hold
  ARGV[5] its scope (JSON)
  Returns 1 when stored (new or replaced), 0 when the name is new and the tenant is at its cap,
  -1 when only the scope was given and there is no such secret.
]]
local exists = redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1
if ARGV[2] == '' then
  if not exists then return -1 end
else
  if not exists and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
    return 0
  end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
return 1
