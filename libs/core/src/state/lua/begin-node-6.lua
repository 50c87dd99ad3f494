--[[
  Reads what a node needs before it runs and marks it running, in one round trip.
  ARGV[1] node id, ARGV[2] generation of the node job, ARGV[3] live JSON for a running node,
  ARGV[4] '1' to count this as an execution (loop suspicion), '2' to count it without
  announcing it (a map's item, whose map reports progress instead), ARGV[5] '1' to charge one tool call,
  ARGV[6..] ids whose snapshots to read
  Returns { run status | 'stale' | false, own snapshot | false, executions, tool calls so far,
  tool time so far (ms), attempts JSON | false, progress JSON | false, deadline (epoch ms) | false,
  budget JSON | false, tokens so far, cost so far (nano-dollars), snapshot of each ARGV[6..] | false ... }.
  Counting and charging happen only when the run is running and the node has no snapshot.
  Each of the run's hashes is read with one HMGET: a node's start costs a few commands, not one per
  field. It writes only live, aux and events, which exist while the run runs.
  'stale' also answers a node deferred to the replan its session's environment change asked for.
]]
ttlKeys = {}
local reads = {}
for i = 6, #ARGV do reads[#reads + 1] = ARGV[i] end
return beginNode(ARGV[1], ARGV[2], ARGV[3], ARGV[4] ~= '0', ARGV[5] == '1', reads, ARGV[4] == '2')
