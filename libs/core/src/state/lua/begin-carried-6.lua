--[[
  Begins the nodes a carrier job runs (a run's first ready nodes, started together in one job:
  executor/handoff.ts), those still queued, each as begin-node-6.lua would (`beginNode` in
  run.lib.lua), all at this step's instant.
  ARGV[1] generation of the job, ARGV[2] live JSON for a running node (its `startedAt` replaced
  by this step's instant), ARGV[3] JSON list of the carried nodes in the job's order:
  [{id, charge, reads}]
  Returns { start time (ISO) | false, then for each carried node in order: { 1, its begin answer }
  when begun here, else { 0, its live JSON | false } }.
  A node no longer queued is not begun again: a crashed delivery of this job began it (its live
  state or snapshot names the job, `carriedBy`), or it moved to a job of its own. The caller
  recovers what it finds, as a redelivered handoff does.
]]
-- It writes only live, aux and events, which exist while the run is queued or running.
ttlKeys = {}
local carried = cjson.decode(ARGV[3])
local ids = {}
for i, node in ipairs(carried) do ids[i] = node.id end
local lives = hmgetList(KEYS[4], ids)
local result = { false }
local live = nil
for i, node in ipairs(carried) do
  local state = lives[i]
  if state and string.find(state, '"status":"queued"', 1, true) then
    if not live then
      result[1] = isoNow()
      live = string.gsub(ARGV[2], '"startedAt":"[^"]*"', '"startedAt":"' .. result[1] .. '"')
    end
    result[#result + 1] = { 1, beginNode(node.id, ARGV[1], live, true, node.charge, node.reads) }
  else
    result[#result + 1] = { 0, state or false }
  end
end
return result
