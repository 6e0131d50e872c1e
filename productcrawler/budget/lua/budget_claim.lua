-- Let one request through the shared budget: number it and say when it may go.
-- The arithmetic of productcrawler/budget/plan.py (Plan.claim), in the server's clock.
-- KEYS[1] the budget hash. ARGV: ttl (seconds), QUOTA_MARGIN, LEVEL_MARGIN, LEAK_SAFETY,
-- PROBE_INTERVAL, RESET_MARGIN, cap (requests per second, for the pace shown), SKEW (plan.level_margin),
-- HOLD (seconds: a request whose time is further away is not let through, and asks again),
-- RATE_LIMIT_HEADERS_MAX_WAIT (seconds: a budget recorded under a longer bound, by another instance or an
-- earlier run, holds this one no longer after its answer than this).
-- Returns now, at, seq, pace, left, reset_in as strings (-1: unknown; seq -1: not let through, ask again at `at`).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local key = KEYS[1]
local ttl, quota_margin, level_margin = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local leak_safety, probe, reset_margin, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
  tonumber(ARGV[7])
local skew, hold, max_wait = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local function fmt(x) return string.format('%.6f', x) end
local seq = (tonumber(redis.call('HGET', key, 'seq')) or 0) + 1
local s = redis.call('HMGET', key, 'kind', 'rseq', 'observed_at', 'remaining', 'reset_at', 'quota', 'window',
  'size', 'leak', 'last_at', 'cost')
local kind, rseq, observed = s[1], tonumber(s[2]), tonumber(s[3])
local last_at = tonumber(s[10]) or -1e18
local at, pace, left, reset_in = now, -1, -1, -1
local start = math.max(now, last_at)
local opened = nil  -- the writes of a window this claim opens, made only if the request goes

if kind == 'w' then
  local remaining, reset_at = tonumber(s[4]), tonumber(s[5])
  local quota, window = tonumber(s[6]), tonumber(s[7])
  if reset_at > observed + max_wait then
    reset_at, window = observed + max_wait, -1  -- clamped here too: what follows that reset is unknown
  end
  local function margin(r) return math.max(1, quota_margin * ((quota >= 0) and quota or r)) end
  local usable = remaining - (seq - 1 - rseq) - margin(remaining)
  if usable >= 1 and start < reset_at + reset_margin then
    local base = math.max(last_at, observed)
    at = math.max(start, base + (reset_at - base) / usable)
  else
    at = math.max(start, reset_at + reset_margin)
    if quota < 0 or window < 0 then
      opened = {}
      kind = nil
    else
      local r = reset_at + window
      while r + reset_margin <= at do r = r + window end
      local width = reset_at - (tonumber(redis.call('HGET', key, 'reset_lo')) or reset_at)
      rseq, remaining, reset_at = seq - 1, quota, r
      opened = {'rseq', rseq, 'remaining', remaining, 'reset_at', fmt(r), 'reset_lo', fmt(r - width),
        'observed_at', fmt(at)}
    end
  end
  if kind then
    left = math.max(0, remaining - (seq - rseq) - margin(remaining))
    reset_in = math.max(0, reset_at - now)
    pace = (reset_in > 0) and math.min(cap, left / reset_in) or cap
  end
elseif kind == 'l' then
  local level, size, leak, cost = tonumber(s[4]), tonumber(s[8]), tonumber(s[9]), tonumber(s[11]) or 1
  local filled = level + (seq - rseq) * cost  -- with this request, before any leak
  local excess = filled - (size - math.max(1, level_margin * size, math.min(skew, size / 4)))
  if excess > 0 then
    if leak > 0 then
      at = math.max(now, observed + excess / (leak * leak_safety))
    else
      at = math.max(now, last_at + ((filled <= size) and probe or 5 * probe))
    end
  end
  local leaked = math.max(0, leak) * math.max(0, now - observed)
  left = math.max(0, math.min(size, size - level - (seq - rseq) * cost + leaked)) / cost
  pace = (leak > 0) and math.min(cap, leak * leak_safety / cost) or 1 / probe
end

if at - now > hold then
  -- Not let through: no number, no write; a newer answer may say otherwise by the time it asks again.
  if kind == nil and opened then pace, left, reset_in = 0, 0, math.max(0, at - now) end
  return {fmt(now), fmt(now + hold), '-1', string.format('%.3f', pace), string.format('%.3f', left),
          string.format('%.6f', reset_in)}
end
redis.call('HSET', key, 'seq', seq, 'last_at', fmt(at))
if opened then
  if #opened == 0 then redis.call('HDEL', key, 'kind') else redis.call('HSET', key, unpack(opened)) end
end
redis.call('PEXPIRE', key, math.ceil(ttl * 1000))
return {fmt(now), fmt(at), tostring(seq), string.format('%.3f', pace), string.format('%.3f', left),
        string.format('%.6f', reset_in)}
