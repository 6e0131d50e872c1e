-- After chunked.lua (redis_scripts.py joins them).
-- KEYS: pass, done, done_count, inflight, queue, delayed, instances
-- ARGV: pass id, pass token, finished ttl, positions...
-- Returns the pass's done count, or -1 when the pass is no longer this one: a pass
-- that Redis lost and started again under the same id has another token.
local f = redis.call('HMGET', KEYS[1], 'id', 'token', 'start', 'end', 'status')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then return -1 end
local start, last = tonumber(f[3]), tonumber(f[4])
local total = last - start + 1
local added = 0
for i = 4, #ARGV do
  local id = tonumber(ARGV[i])
  if id >= start and id <= last and redis.call('SETBIT', KEYS[2], id - start, 1) == 0 then
    added = added + 1
  end
end
chunked('HDEL', KEYS[4], ARGV, 4)
local done = redis.call('INCRBY', KEYS[3], added)
if done >= total and f[5] == 'running' then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'status', 'finished', 'finished_at', t[1])
  -- Kept for inspection, then gone, even if no instance lives to settle the pass
  -- (each instance's inflight hash expires when that instance settles or is recovered).
  for k = 2, 7 do redis.call('EXPIRE', KEYS[k], ARGV[3]) end
end
return done
