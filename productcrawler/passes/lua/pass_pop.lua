-- After chunked.lua (redis_scripts.py joins them).
-- KEYS: pass, queue, delayed, inflight, instances; ARGV: n, instance, pass id, pass token
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'id', 'status', 'token')
if f[1] ~= ARGV[3] or f[2] ~= 'running' or f[3] ~= ARGV[4] then
  return {}
end
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)  -- few enough to unpack
if #due > 0 then
  redis.call('ZREM', KEYS[3], unpack(due))
  redis.call('RPUSH', KEYS[2], unpack(due))
end
local n = tonumber(ARGV[1])
local out = redis.call('LPOP', KEYS[2], n)
if not out then out = {} end
if #out < n then
  local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor'))
  local last = tonumber(redis.call('HGET', KEYS[1], 'end'))
  local take = math.min(n - #out, last - cursor + 1)
  if take > 0 then
    redis.call('HSET', KEYS[1], 'cursor', cursor + take)
    for i = 0, take - 1 do out[#out + 1] = (cursor + i) .. ':0' end
  end
end
if #out > 0 then
  local fields = {}
  for _, entry in ipairs(out) do
    fields[#fields + 1] = string.match(entry, '^(%d+)')
    fields[#fields + 1] = entry
  end
  chunked('HSET', KEYS[4], fields)
  redis.call('SADD', KEYS[5], ARGV[2])
end
return out
