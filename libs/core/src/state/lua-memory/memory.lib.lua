--[[
  The library every memory script shares (prepended when the scripts load). An agent's keys are
  always KEYS[1] meta, KEYS[2] runs, KEYS[3] stats, KEYS[4] lessons; the caller appends the idle TTL
  (ms) to every memory script's own arguments. The script's body runs, then `touch()` gives every
  key of the agent's memory the idle TTL: memory nobody writes to expires whole, and the agents set
  drops agents whose memory is gone when it is listed.
]]
local IDLE_TTL_MS = tonumber(ARGV[#ARGV])

local function touch()
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], IDLE_TTL_MS) end
end
