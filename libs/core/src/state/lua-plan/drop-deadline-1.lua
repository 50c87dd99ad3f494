--[[
  Takes a run off the run deadlines, provided its entry is still one that was due: a run started
  again since (a replan, a resume) has a new entry, which stays.
  KEYS[1] the run deadlines
  ARGV[1] the run id, ARGV[2] the time (epoch ms) its entry was due by
  Returns 1 when removed, 0 otherwise.
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
