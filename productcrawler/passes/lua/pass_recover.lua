-- After chunked.lua (redis_scripts.py joins them).
-- KEYS: queue, instances, then per instance ARGV[i]: heartbeat KEYS[1 + 2i], inflight KEYS[2 + 2i]
local moved = 0
for i, instance in ipairs(ARGV) do
  local heartbeat, inflight = KEYS[1 + 2 * i], KEYS[2 + 2 * i]
  if redis.call('SISMEMBER', KEYS[2], instance) == 1 and redis.call('EXISTS', heartbeat) == 0 then
    local entries = redis.call('HVALS', inflight)
    if #entries > 0 then
      chunked('RPUSH', KEYS[1], entries)
      moved = moved + #entries
    end
    redis.call('DEL', inflight)
    redis.call('SREM', KEYS[2], instance)
  end
end
return moved
