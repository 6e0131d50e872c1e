-- Let one request through the shared budget: number it and say when it may go.
-- The arithmetic of productcrawler/budget/plan.py (Plan.claim), in the server's clock.
-- KEYS[1] the budget hash. ARGV: ttl (seconds), QUOTA_MARGIN, LEVEL_MARGIN, LEAK_SAFETY,
-- PROBE_INTERVAL, RESET_MARGIN, cap (requests per second: the pace shown, and a clamped window's),
-- SKEW (plan.level_margin, plan.margin),
-- HOLD (seconds: a request whose time is further away is not let through, and asks again),
-- RATE_LIMIT_HEADERS_MAX_WAIT (seconds: a budget recorded under a longer bound, by another instance or an
-- earlier run, holds this one no longer after its answer than this), FIRST_PROBE_WAIT (seconds from the last
-- request to the first probe of a spent window whose reset was clamped; 'probe_wait' keeps the next one's).
-- Returns now, at, seq, pace, left, reset_in as strings (-1: unknown; seq -1: not let through, ask again at `at`).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local key = KEYS[1]
local ttl, quota_margin, level_margin = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local leak_safety, probe, reset_margin, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
  tonumber(ARGV[7])
local skew, hold, max_wait, first_probe = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]),
  tonumber(ARGV[11])
local function fmt(x) return string.format('%.6f', x) end
local seq = (tonumber(redis.call('HGET', key, 'seq')) or 0) + 1
local s = redis.call('HMGET', key, 'kind', 'rseq', 'observed_at', 'remaining', 'reset_at', 'quota', 'window',
  'size', 'leak', 'last_at', 'clamped', 'probe_wait', 'cost')
local kind, rseq, observed = s[1], tonumber(s[2]), tonumber(s[3])
local last_at = tonumber(s[10]) or -1e18
local at, pace, left, reset_in = now, -1, -1, -1
local start = math.max(now, last_at)
local opened = nil  -- the writes of a window this claim opens, made only if the request goes
local probe_wait = tonumber(s[12]) or first_probe
local probed, probing = nil, false  -- the probe wait after this request (written only if it goes); a probe

if kind == 'w' then
  local remaining, reset_at = tonumber(s[4]), tonumber(s[5])
  local quota, window = tonumber(s[6]), tonumber(s[7])
  local clamped = s[11] == '1'
  if reset_at > observed + max_wait then
    reset_at, window, clamped = observed + max_wait, -1, true  -- clamped here too: what follows is unknown
  end
  local function margin(r)
    local base = (quota >= 0) and quota or r
    return math.max(1, quota_margin * base) + (clamped and math.min(skew, base / 4) or 0)
  end
  local usable = remaining - (seq - 1 - rseq) - margin(remaining)
  local within = start < reset_at + reset_margin
  -- A clamped reset is not believed, only the count: what is usable goes at the cap (up to SKEW more kept);
  -- once spent, probes go at doubling intervals until an answer tells of room again or the clamped reset
  -- passes.
  local probe_at = math.max(start, last_at + probe_wait)
  if clamped and within and usable >= 1 then
    at, probed = math.max(start, last_at + 1 / cap), first_probe
  elseif clamped and within and probe_at < reset_at + reset_margin then
    at, probed, probing = probe_at, math.min(2 * probe_wait, reset_at - observed), true
  elseif not clamped and within and usable >= 1 then
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
    if clamped then
      pace = (left >= 1) and cap or 0
    else
      pace = (reset_in > 0) and math.min(cap, left / reset_in) or cap
    end
  end
elseif kind == 'l' then
  local level, size, leak, cost = tonumber(s[4]), tonumber(s[8]), tonumber(s[9]), tonumber(s[13]) or 1
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

if at - now > hold or (probing and at > now) then
  -- Not let through: no number, no write; a newer answer may say otherwise by the time it asks again
  -- (a probe asks again at its time).
  if kind == nil and opened then pace, left, reset_in = 0, 0, math.max(0, at - now) end
  return {fmt(now), fmt(math.min(at, now + hold)), '-1', string.format('%.3f', pace),
          string.format('%.3f', left), string.format('%.6f', reset_in)}
end
redis.call('HSET', key, 'seq', seq, 'last_at', fmt(at))
if probed and probed ~= probe_wait then redis.call('HSET', key, 'probe_wait', fmt(probed)) end
if opened then
  if #opened == 0 then redis.call('HDEL', key, 'kind') else redis.call('HSET', key, unpack(opened)) end
end
redis.call('PEXPIRE', key, math.ceil(ttl * 1000))
return {fmt(now), fmt(at), tostring(seq), string.format('%.3f', pace), string.format('%.3f', left),
        string.format('%.6f', reset_in)}
