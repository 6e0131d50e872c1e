"""The shared pass's Lua scripts (``lua/*.lua``): each runs atomically in Redis and declares every key it touches.

Declared keys let a Redis Cluster route each script to the node that holds
them (all keys of a pass share one hash tag, see ``redis_pass.py``). Times are
the Redis server's (``TIME``), never an instance's clock. A script that sends
a list which grows with an instance's leases or a batch starts with
``chunked.lua``: Lua's ``unpack`` fails above about 8,000 elements.
"""

from productcrawler.redis_lua import lua_script

OPEN = lua_script("productcrawler.passes", "pass_open.lua")
POP = lua_script("productcrawler.passes", "chunked.lua", "pass_pop.lua")
PUSH = lua_script("productcrawler.passes", "chunked.lua", "pass_push.lua")
ACK = lua_script("productcrawler.passes", "chunked.lua", "pass_ack.lua")
RECOVER = lua_script("productcrawler.passes", "chunked.lua", "pass_recover.lua")
RELEASE = lua_script("productcrawler.passes", "chunked.lua", "pass_release.lua")
LISTING_REVEAL = lua_script("productcrawler.passes", "listing_reveal.lua")
