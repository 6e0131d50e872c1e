-- Lease count slots of the shared bucket (after bucket_prelude.lua).
-- KEYS[1] bucket hash; ARGV rate, burst, count, recovery_per_second, ttl, pace
-- (this instance's latency-based ceiling, or the rate when it has none), lead
-- (seconds: no slot earlier than now + lead, the time the reply takes to be of use).
-- Returns server_now, base, interval, factor as strings (Lua numbers would be
-- truncated to integers on the way out).
local rate, burst, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'tat', 'factor', 'factor_at')
local factor = recovered_factor(s[2], s[3], now, tonumber(ARGV[4]))
local interval = 1 / math.min(rate * factor, tonumber(ARGV[6]))
local tat = math.max(tonumber(s[1]) or now, now + tonumber(ARGV[7]))
local base = tat - (burst - 1) / rate
tat = math.ceil((tat + count * interval) * 1000000) / 1000000
redis.call('HSET', KEYS[1], 'tat', string.format('%.6f', tat))
redis.call('PEXPIRE', KEYS[1], math.ceil((tat - now + tonumber(ARGV[5])) * 1000))
return {string.format('%.6f', now), string.format('%.6f', base),
        string.format('%.17g', interval), string.format('%.6f', factor)}
