--[[
  Moves a session's lane on once its running run is over. KEYS: meta, queue, buffer, transcript, env.
  ARGV[1] the run (or collect marker) that is over, ARGV[2] now (epoch ms), ARGV[3] collect debounce (ms)
  Returns one of:
    { 'noop' }               that run no longer holds the lane
    { 'idle' }               nothing waits: the lane is free
    { 'run', runId }         the next queued run holds the lane now
    { 'collect', count }     the collected messages (count of them) are due: the caller makes their
                             run and commits it with lane-commit-collect
    { 'collect-wait', dueAt }  collected messages wait for the debounce to pass
  A session whose keys expired (idle) answers idle and is not created again.
  Then the idle TTL and the transcript cap (see session.lib.lua).
]]
local running = redis.call('HGET', KEYS[1], 'running')
if not running and redis.call('EXISTS', KEYS[1]) == 0 then return { 'idle' } end
if running ~= ARGV[1] then return { 'noop' } end
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then
  redis.call('HSET', KEYS[1], 'running', '')
  return { 'idle' }
end
if head == 'collect' then
  local dueAt = tonumber(redis.call('HGET', KEYS[1], 'lastCollectAt') or '0') + tonumber(ARGV[3])
  if tonumber(ARGV[2]) < dueAt then
    redis.call('HSET', KEYS[1], 'running', 'collect')
    return { 'collect-wait', dueAt }
  end
  redis.call('HSET', KEYS[1], 'running', 'collect')
  return { 'collect', redis.call('LLEN', KEYS[3]) }
end
redis.call('LPOP', KEYS[2])
redis.call('HSET', KEYS[1], 'running', head)
return { 'run', head }
