-- KEYS[1] pass hash, KEYS[2] pass id sequence
-- ARGV: first position, last position, fresh, token, fresh join window (s), the id list's descriptor,
-- '1' when the pass grows as it runs (a listing's pages: joined whatever its last position is now)
-- Returns {pass id, joined (1/0), the pass's token, the replaced pass's id or ''}, or
-- {'refused', the running pass's id, its descriptor} when this instance's id list is another
-- and either list is a file: instances of a pass over a file must all have that file.
local pass = KEYS[1]
local f = redis.call('HMGET', pass, 'id', 'status', 'start', 'end', 'token', 'fresh_at', 'ids')
local t = redis.call('TIME')
if f[2] == 'running' then
  if f[7] == ARGV[6] and f[3] == ARGV[1] and (f[4] == ARGV[2] or ARGV[7] == '1') then
    if ARGV[3] ~= '1' then return {f[1], 1, f[5] or '', ''} end
    -- fresh=1 given to several instances started together: the first starts the pass, the rest join it.
    if f[6] and tonumber(t[1]) - tonumber(f[6]) < tonumber(ARGV[5]) then return {f[1], 1, f[5] or '', ''} end
  elseif ARGV[3] ~= '1' and (string.sub(f[7] or '', 1, 5) == 'file:' or string.sub(ARGV[6], 1, 5) == 'file:') then
    return {'refused', f[1], f[7] or ''}
  end
end
local id = redis.call('INCR', KEYS[2])
redis.call('DEL', pass)
redis.call('HSET', pass, 'id', id, 'start', ARGV[1], 'end', ARGV[2], 'cursor', ARGV[1],
           'status', 'running', 'started_at', t[1], 'token', ARGV[4], 'ids', ARGV[6])
if ARGV[3] == '1' then redis.call('HSET', pass, 'fresh_at', t[1]) end
return {tostring(id), 0, ARGV[4], f[1] or ''}
