--[[
  Marks a settled run's follow-up (its slot, its session's lane, its webhooks) done by the node job
  that settled it, so its root job's pass does not repeat it.
  Returns 1 when marked, 0 for a run that is unknown (expired meanwhile) or not settled.
]]
-- Writes only the settled run's hash, which has its retention TTL: nothing is created.
ttlKeys = {}
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'followedUp', '1')
return 1
