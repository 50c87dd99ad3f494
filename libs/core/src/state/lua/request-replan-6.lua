--[[
  Hands a running task run back to the plan loop after a node failure that calls for it.
  ARGV[1] failure JSON, ARGV[2] generation of the failing node
  Returns 1 when the replan is requested (now or before), 0 when it cannot be: the run is not a
  running task run of that generation, or its replans are used up.
]]
return requestReplan(ARGV[1], tonumber(ARGV[2]))
