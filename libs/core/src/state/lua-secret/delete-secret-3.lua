--[[
  Deletes one secret of a tenant: its value, its update time and its scope together.
  KEYS[1] the tenant's values hash (name → encrypted value)
  KEYS[2] the tenant's updated hash (name → ISO time of the last write)
  KEYS[3] the tenant's scopes hash (name → JSON scope)
  ARGV[1] the secret's name
  Returns 1 when it existed, 0 otherwise.
]]
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
