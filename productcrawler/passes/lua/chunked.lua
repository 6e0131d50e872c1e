-- The start of the pass's scripts that send a list which grows with an instance's leases or a
-- batch: unpack() fails above about 8,000 elements ("too many results to unpack", Lua's stack
-- limit), and an instance can hold more leases than that.
-- chunked(command, key, items, first): command key items[first..], 1,000 items per call (even, so
-- a field/value list stays in pairs). Still one script: still atomic.
local function chunked(command, key, items, first)
  for i = first or 1, #items, 1000 do
    redis.call(command, key, unpack(items, i, math.min(i + 999, #items)))
  end
end
