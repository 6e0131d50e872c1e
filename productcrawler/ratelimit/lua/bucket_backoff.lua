-- Lower the shared factor for a 429 (after bucket_prelude.lua).
-- KEYS[1] bucket hash; ARGV granted_at (server seconds, -1 unknown),
-- multiplier, floor, recovery_per_second, ttl. Returns applied ('1'/'0'), factor.
local s = redis.call('HMGET', KEYS[1], 'tat', 'factor', 'factor_at', 'backoff_at')
local factor = recovered_factor(s[2], s[3], now, tonumber(ARGV[4]))
local granted_at = tonumber(ARGV[1])
if granted_at >= 0 and s[4] and granted_at < tonumber(s[4]) then
  return {'0', string.format('%.6f', factor)}
end
factor = math.max(tonumber(ARGV[3]), factor * tonumber(ARGV[2]))
local stamp = string.format('%.6f', now)
redis.call('HSET', KEYS[1], 'factor', string.format('%.6f', factor), 'factor_at', stamp,
           'backoff_at', stamp)
local tat = math.max(tonumber(s[1]) or now, now)
redis.call('PEXPIRE', KEYS[1], math.ceil((tat - now + tonumber(ARGV[5])) * 1000))
return {'1', string.format('%.6f', factor)}
