-- After chunked.lua (redis_scripts.py joins them).
-- KEYS: queue, inflight, instances; ARGV: instance
local entries = redis.call('HVALS', KEYS[2])
if #entries > 0 then chunked('RPUSH', KEYS[1], entries) end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return #entries
