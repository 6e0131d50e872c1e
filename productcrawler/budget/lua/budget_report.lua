-- Record one answer's budget as the shared one, if it is the newest and not older than its window.
-- KEYS[1] the budget hash. ARGV: ttl, kind ('w' fixed window, 'l' leaky bucket), seq of the answered
-- request (-1: let through before this instance knew of a budget), age (seconds since the answer came),
-- then for 'w': remaining, reset_after (seconds from the answer: the latest the reset can be), quota,
-- window (-1: unknown), reset_before (the earliest it can be), clamped (1: the reset was clamped to
-- RATE_LIMIT_HEADERS_MAX_WAIT, and is not narrowed by other answers); the bounds of the answers of one
-- window, whichever instance had them, are intersected;
-- for 'l': level, size, leak (units per second, -1: unknown), cost (units one request takes).
-- Returns 1 if recorded, 0 if not.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local key = KEYS[1]
local ttl, kind, seq, age = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local function fmt(x) return string.format('%.6f', x) end
local s = redis.call('HMGET', key, 'kind', 'rseq', 'seq', 'reset_lo', 'reset_at', 'remaining')
local current = tonumber(s[3]) or 0
if s[1] and (seq < 0 or seq < tonumber(s[2])) then return 0 end
if seq < 0 then seq = current end
local observed = now - age
local span
if kind == 'w' then
  local window = tonumber(ARGV[8])
  span = (window >= 0) and window or math.max(1, tonumber(ARGV[6]))
else
  local leak = tonumber(ARGV[7])
  span = (leak > 0) and math.max(1, tonumber(ARGV[6]) / leak) or 1
end
if age > span then return 0 end
if kind == 'w' then
  local low, high = observed + tonumber(ARGV[9]), observed + tonumber(ARGV[6])
  local s_low, s_high = tonumber(s[4]), tonumber(s[5])
  -- More left than before: a new window, whose reset the old bounds do not bound.
  local same = s[1] == 'w' and s_low and tonumber(ARGV[5]) <= tonumber(s[6]) and ARGV[10] ~= '1'
  if same and math.max(low, s_low) <= math.min(high, s_high) then
    low, high = math.max(low, s_low), math.min(high, s_high)
  end
  redis.call('HSET', key, 'kind', 'w', 'rseq', seq, 'observed_at', fmt(observed), 'remaining', ARGV[5],
    'reset_at', fmt(high), 'reset_lo', fmt(low), 'quota', ARGV[7], 'window', ARGV[8], 'clamped', ARGV[10])
else
  -- An instance that has not measured the leak yet keeps the one another measured.
  local leak = ARGV[7]
  if tonumber(leak) < 0 and s[1] == 'l' then leak = redis.call('HGET', key, 'leak') or leak end
  redis.call('HSET', key, 'kind', 'l', 'rseq', seq, 'observed_at', fmt(observed), 'remaining', ARGV[5],
    'size', ARGV[6], 'leak', leak, 'cost', ARGV[8])
end
redis.call('PEXPIRE', key, math.ceil(ttl * 1000))
return 1
