-- After chunked.lua (redis_scripts.py joins them).
-- KEYS: queue, delayed, inflight, pass; ARGV: pass id, pass token, then entry, delay ms (0: now) pairs
-- Returns how many entries were pushed: 0, pushing nothing, when the pass is no longer this one
-- (the next pass owes the ids).
local f = redis.call('HMGET', KEYS[4], 'id', 'token')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due, delayed, ids = {}, {}, {}
for i = 3, #ARGV, 2 do
  local entry, delay = ARGV[i], tonumber(ARGV[i + 1])
  if delay > 0 then
    delayed[#delayed + 1] = now + delay  -- score, member: chunked keeps the pairs together
    delayed[#delayed + 1] = entry
  else
    due[#due + 1] = entry
  end
  ids[#ids + 1] = string.match(entry, '^(%d+)')
end
chunked('RPUSH', KEYS[1], due)
chunked('ZADD', KEYS[2], delayed)
chunked('HDEL', KEYS[3], ids)
return #ids
