--[[
  The current context's history, as far as a run is to see it: where the context starts, its latest
  compaction, and the message lines after that compaction. KEYS: meta, queue, buffer, transcript, env.
  ARGV: the idle TTL and the transcript cap (see session.lib.lua).
  Returns { contextFrom, start, length, compaction JSON or nil, { index, line, index, line, … } }:
  `start` is the first line number read (after the compaction's covers.toIndex, else contextFrom),
  `length` the transcript's length in line numbers, and the pairs are the message lines from
  `start` on, oldest first, each with its line number. Line numbers survive the cap (see
  session.lib.lua); lines the cap dropped are not read. Only the lines after the latest compaction
  are read, so the cost does not grow with the transcript.

  A context started before contextFrom was recorded gets it here, once: the line after the latest
  /new or /reset command line (looked for from the end), or 0 for the first context.
  Lines are recognised by their first field, as the session service writes them
  ({"type":"message",…}, {"type":"command","command":…}).
]]
local meta, transcript = KEYS[1], KEYS[4]
local dropped = trimmed()
local from = tonumber(redis.call('HGET', meta, 'contextFrom'))
if not from then
  from = 0
  if tonumber(redis.call('HGET', meta, 'contextId') or '1') > 1 then
    local last = redis.call('LLEN', transcript) - 1
    local found = false
    while last >= 0 and not found do
      local first = math.max(0, last - 199)
      local chunk = redis.call('LRANGE', transcript, first, last)
      for j = #chunk, 1, -1 do
        local line = chunk[j]
        if string.sub(line, 1, 33) == '{"type":"command","command":"new"'
          or string.sub(line, 1, 35) == '{"type":"command","command":"reset"' then
          from = dropped + first + j
          found = true
          break
        end
      end
      last = first - 1
    end
  end
  redis.call('HSETNX', meta, 'contextFrom', from)
end
local compaction = redis.call('HGET', meta, 'compaction')
local start = from
if compaction then
  local after = cjson.decode(compaction).covers.toIndex + 1
  if after > start then start = after end
end
local length = dropped + redis.call('LLEN', transcript)
local messages = {}
for first = math.max(start, dropped), length - 1, 200 do
  local chunk = redis.call('LRANGE', transcript, first - dropped, math.min(first + 199, length - 1) - dropped)
  for j, line in ipairs(chunk) do
    if string.sub(line, 1, 17) == '{"type":"message"' then
      messages[#messages + 1] = first + j - 1
      messages[#messages + 1] = line
    end
  end
end
return { from, start, length, compaction or false, messages }
