-- The start of both bucket scripts (bucket_lease.lua, bucket_backoff.lua): the shared rate
-- factor after its recovery since the latest backoff (BackoffPolicy.recovered in bucket.py), and
-- the server's time, the one clock of every instance.
local function recovered_factor(s_factor, s_factor_at, now, recovery)
  if not s_factor then return 1 end
  local f = tonumber(s_factor) + recovery * math.max(0, now - tonumber(s_factor_at))
  return math.min(1, f)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
