-- Apply one instance's counted outcomes to the proxies' shared health and answer every proxy's
-- state, in one atomic call on the server's clock (the arithmetic of proxies/health.py).
-- KEYS[1] the hash. ARGV: score_max, success, failure, minimum, rest_base,
-- rest_max, ttl, then per proxy: key, successes, failures, draw.
-- Returns server_now, then per proxy: score, rest_until, rests, rested (-1 or seconds).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local smax, up, down, minimum = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local base, rmax = tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {string.format('%.6f', now)}
for i = 8, #ARGV, 4 do
  local key, s, f, draw = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local v = redis.call('HMGET', KEYS[1], key .. ':s', key .. ':r', key .. ':n')
  local score, rest_until, rests = tonumber(v[1]) or smax, tonumber(v[2]) or 0, tonumber(v[3]) or 0
  local rested = -1
  if now >= rest_until and (s > 0 or f > 0) then
    score = math.min(smax, score + s * up)
    score = math.max(0, score - f * down)
    if score >= smax then rests = 0 end
    if f > 0 and score < minimum then
      rests = rests + 1
      local ceiling = math.min(rmax, base * 2 ^ (rests - 1))
      rested = ceiling / 2 + draw * ceiling / 2
      rest_until = now + rested
      score = minimum
    end
    redis.call('HSET', KEYS[1], key .. ':s', string.format('%.6f', score),
               key .. ':r', string.format('%.6f', rest_until), key .. ':n', rests)
  end
  table.insert(out, string.format('%.6f', score))
  table.insert(out, string.format('%.6f', rest_until))
  table.insert(out, tostring(rests))
  table.insert(out, string.format('%.6f', rested))
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[7]))
return out
