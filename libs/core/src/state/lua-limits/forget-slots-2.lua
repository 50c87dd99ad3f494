--[[
  Takes runs that settled or expired without giving their slot back (a process died between
  settling and releasing) out of their tenant's running and waiting sets; a run whose slot was
  taken again since it was read (another score) keeps it.
  KEYS[1] the tenant's running runs, KEYS[2] its waiting runs (see acquire-slot-2)
  ARGV pairs: run id, the score it was read with
  Returns how many slots were freed.
]]
local freed = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], ARGV[i])
    freed = freed + 1
  end
  redis.call('ZREM', KEYS[2], ARGV[i])
end
return freed
