-- KEYS: pass, pages; ARGV: pass id, pass token, then page, URL pairs.
-- Records pages a listing page's answer made known (a page known already keeps its URL) and
-- extends the pass to the last of them. Returns the pass's last position, or -1 when the pass
-- is no longer this one.
local f = redis.call('HMGET', KEYS[1], 'id', 'token', 'end')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then return -1 end
local last = tonumber(f[3])
for i = 3, #ARGV, 2 do
  redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
  local page = tonumber(ARGV[i])
  if page > last then last = page end
end
redis.call('HSET', KEYS[1], 'end', last)
return last
