--[[
  Takes a plan out of the plan cache, provided the entry is still the one a run was planned from
  (or stored): an entry another run wrote since stays.
  KEYS[1] the plan cache entry
  ARGV[1] the run id the entry must name; empty: delete whatever is there
  Returns 1 when deleted, 0 otherwise.
]]
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
if ARGV[1] ~= '' then
  local ok, entry = pcall(cjson.decode, raw)
  if ok and type(entry) == 'table' and entry.runId ~= ARGV[1] then return 0 end
end
return redis.call('DEL', KEYS[1])
