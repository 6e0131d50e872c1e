"""The shared pass's Lua scripts: each runs atomically in Redis and declares every key it touches.

Declared keys let a Redis Cluster route each script to the node that holds
them (all keys of a pass share one hash tag, see ``redis_pass.py``). Times are
the Redis server's (``TIME``), never an instance's clock.

A list that grows with an instance's leases or a batch goes to Redis through
``chunked``: ``unpack`` fails above about 8,000 elements ("too many results to
unpack", Lua's stack limit), and an instance can hold more leases than that.
"""

#: ``chunked(command, key, items, first)``: ``command key items[first..]``, 1,000
#: items per call (even, so a field/value list stays in pairs). Still one script:
#: still atomic.
_CHUNKED = """
local function chunked(command, key, items, first)
  for i = first or 1, #items, 1000 do
    redis.call(command, key, unpack(items, i, math.min(i + 999, #items)))
  end
end
"""

OPEN = """
-- KEYS[1] pass hash, KEYS[2] pass id sequence
-- ARGV: first position, last position, fresh, token, fresh join window (s), the id list's descriptor
-- Returns {pass id, joined (1/0), the pass's token, the replaced pass's id or ''}, or
-- {'refused', the running pass's id, its descriptor} when this instance's id list is another
-- and either list is a file: instances of a pass over a file must all have that file.
local pass = KEYS[1]
local f = redis.call('HMGET', pass, 'id', 'status', 'start', 'end', 'token', 'fresh_at', 'ids')
local t = redis.call('TIME')
if f[2] == 'running' then
  if f[7] == ARGV[6] and f[3] == ARGV[1] and f[4] == ARGV[2] then
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
"""

POP = _CHUNKED + """
-- KEYS: pass, queue, delayed, inflight, instances; ARGV: n, instance, pass id, pass token
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'id', 'status', 'token')
if f[1] ~= ARGV[3] or f[2] ~= 'running' or f[3] ~= ARGV[4] then
  return {}
end
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)  -- few enough to unpack
if #due > 0 then
  redis.call('ZREM', KEYS[3], unpack(due))
  redis.call('RPUSH', KEYS[2], unpack(due))
end
local n = tonumber(ARGV[1])
local out = redis.call('LPOP', KEYS[2], n)
if not out then out = {} end
if #out < n then
  local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor'))
  local last = tonumber(redis.call('HGET', KEYS[1], 'end'))
  local take = math.min(n - #out, last - cursor + 1)
  if take > 0 then
    redis.call('HSET', KEYS[1], 'cursor', cursor + take)
    for i = 0, take - 1 do out[#out + 1] = (cursor + i) .. ':0' end
  end
end
if #out > 0 then
  local fields = {}
  for _, entry in ipairs(out) do
    fields[#fields + 1] = string.match(entry, '^(%d+)')
    fields[#fields + 1] = entry
  end
  chunked('HSET', KEYS[4], fields)
  redis.call('SADD', KEYS[5], ARGV[2])
end
return out
"""

PUSH = _CHUNKED + """
-- KEYS: queue, delayed, inflight, pass; ARGV: pass id, pass token, then entry, delay ms (0: now) pairs
-- Returns how many entries were pushed: 0, pushing nothing, when the pass is no longer this one
-- (the next pass owes the ids).
local f = redis.call('HMGET', KEYS[4], 'id', 'token')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due, delayed, ids = {}, {}, {}
for i = 3, #ARGV, 2 do
  local entry, delay = ARGV[i], tonumber(ARGV[i + 1])
  if delay > 0 then
    delayed[#delayed + 1] = now + delay  -- score, member: chunked keeps the pairs together
    delayed[#delayed + 1] = entry
  else
    due[#due + 1] = entry
  end
  ids[#ids + 1] = string.match(entry, '^(%d+)')
end
chunked('RPUSH', KEYS[1], due)
chunked('ZADD', KEYS[2], delayed)
chunked('HDEL', KEYS[3], ids)
return #ids
"""

ACK = _CHUNKED + """
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
"""

RECOVER = _CHUNKED + """
-- KEYS: queue, instances, then per instance ARGV[i]: heartbeat KEYS[1 + 2i], inflight KEYS[2 + 2i]
local moved = 0
for i, instance in ipairs(ARGV) do
  local heartbeat, inflight = KEYS[1 + 2 * i], KEYS[2 + 2 * i]
  if redis.call('SISMEMBER', KEYS[2], instance) == 1 and redis.call('EXISTS', heartbeat) == 0 then
    local entries = redis.call('HVALS', inflight)
    if #entries > 0 then
      chunked('RPUSH', KEYS[1], entries)
      moved = moved + #entries
    end
    redis.call('DEL', inflight)
    redis.call('SREM', KEYS[2], instance)
  end
end
return moved
"""

RELEASE = _CHUNKED + """
-- KEYS: queue, inflight, instances; ARGV: instance
local entries = redis.call('HVALS', KEYS[2])
if #entries > 0 then chunked('RPUSH', KEYS[1], entries) end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return #entries
"""
