"""One pass shared by every instance through Redis: lazy seeding, leases, acknowledgement.

Keys, under ``{REDIS_KEY_PREFIX}:products`` (the braces are literal: the
prefix is the keys' Redis Cluster hash tag, and every script declares its keys):

- ``pass`` (hash): the current pass: ``id``, ``start``, ``end``, ``cursor`` (next
  id never handed out), ``status`` (``running``/``finished``), times.
- ``pass:{id}:queue`` (list): ids to fetch again (retries due now, leases
  recovered from dead instances). Entries are ``"<product_id>:<retry_times>"``.
- ``pass:{id}:delayed`` (zset): retries that must wait, scored by the Redis
  server's clock in ms, so no instance's clock skew can send one early.
- ``pass:{id}:inflight:{instance}`` (hash): ids an instance holds, until their
  outcome is committed to the database (the lease).
- ``pass:{id}:done`` (bitmap) and ``pass:{id}:done_count``: ids with a
  committed outcome. Set only after the database commit.
- ``pass:{id}:instances`` (set) and ``instance:{instance}`` (heartbeat, TTL).

Seeding is a cursor: ids are handed out from it in small batches when the
queue is empty, so a pass of any size costs Redis a bitmap of one bit per id.
An instance that dies (even ``kill -9``) stops its heartbeat; any live
instance then moves its leases back to the queue. Duplicated fetches after a
crash are possible; lost ids are not.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

#: Seconds without a heartbeat after which an instance counts as dead.
HEARTBEAT_TTL = 10
#: Seconds a finished pass's keys are kept, for inspection.
FINISHED_TTL = 24 * 3600
#: Instances given fresh=1 within this many seconds of a pass that fresh=1
#: started join it rather than start one each (several instances started together).
FRESH_JOIN_WINDOW = 30

#: What ``RedisPass.status()`` says of the pass an instance works on.
RUNNING, FINISHED, REPLACED, LOST = "running", "finished", "replaced", "lost"

_OPEN = """
-- KEYS[1] pass hash, KEYS[2] pass id sequence; ARGV: start, end, fresh, token, fresh join window (s)
-- Returns {pass id, joined (1/0), the pass's token, the replaced pass's id or ''}.
local pass = KEYS[1]
local f = redis.call('HMGET', pass, 'id', 'status', 'start', 'end', 'token', 'fresh_at')
local t = redis.call('TIME')
if f[2] == 'running' and f[3] == ARGV[1] and f[4] == ARGV[2] then
  if ARGV[3] ~= '1' then return {f[1], 1, f[5] or '', ''} end
  -- fresh=1 given to several instances started together: the first starts the pass, the rest join it.
  if f[6] and tonumber(t[1]) - tonumber(f[6]) < tonumber(ARGV[5]) then return {f[1], 1, f[5] or '', ''} end
end
local id = redis.call('INCR', KEYS[2])
redis.call('DEL', pass)
redis.call('HSET', pass, 'id', id, 'start', ARGV[1], 'end', ARGV[2], 'cursor', ARGV[1],
           'status', 'running', 'started_at', t[1], 'token', ARGV[4])
if ARGV[3] == '1' then redis.call('HSET', pass, 'fresh_at', t[1]) end
return {tostring(id), 0, ARGV[4], f[1] or ''}
"""

_POP = """
-- KEYS: pass, queue, delayed, inflight, instances; ARGV: n, instance, pass id
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[3] or redis.call('HGET', KEYS[1], 'status') ~= 'running' then
  return {}
end
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)
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
  redis.call('HSET', KEYS[4], unpack(fields))
  redis.call('SADD', KEYS[5], ARGV[2])
end
return out
"""

_PUSH = """
-- KEYS: queue, delayed, inflight; ARGV: entry, delay ms (0: now)
local delay = tonumber(ARGV[2])
local id = string.match(ARGV[1], '^(%d+)')
if delay > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[2], now + delay, ARGV[1])
else
  redis.call('RPUSH', KEYS[1], ARGV[1])
end
redis.call('HDEL', KEYS[3], id)
return 1
"""

_ACK = """
-- KEYS: pass, done, done_count, inflight; ARGV: pass id, finished ttl, ids...
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return -1 end
local start = tonumber(redis.call('HGET', KEYS[1], 'start'))
local total = tonumber(redis.call('HGET', KEYS[1], 'end')) - start + 1
local added = 0
for i = 3, #ARGV do
  if redis.call('SETBIT', KEYS[2], tonumber(ARGV[i]) - start, 1) == 0 then added = added + 1 end
end
redis.call('HDEL', KEYS[4], unpack(ARGV, 3))
local done = redis.call('INCRBY', KEYS[3], added)
if done >= total and redis.call('HGET', KEYS[1], 'status') == 'running' then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'status', 'finished', 'finished_at', t[1])
  -- Kept for inspection, then gone, even if no instance lives to settle the pass.
  redis.call('EXPIRE', KEYS[2], ARGV[2])
  redis.call('EXPIRE', KEYS[3], ARGV[2])
end
return done
"""

_RECOVER = """
-- KEYS: queue, instances, then per instance ARGV[i]: heartbeat KEYS[1 + 2i], inflight KEYS[2 + 2i]
local moved = 0
for i, instance in ipairs(ARGV) do
  local heartbeat, inflight = KEYS[1 + 2 * i], KEYS[2 + 2 * i]
  if redis.call('SISMEMBER', KEYS[2], instance) == 1 and redis.call('EXISTS', heartbeat) == 0 then
    local entries = redis.call('HVALS', inflight)
    if #entries > 0 then
      redis.call('RPUSH', KEYS[1], unpack(entries))
      moved = moved + #entries
    end
    redis.call('DEL', inflight)
    redis.call('SREM', KEYS[2], instance)
  end
end
return moved
"""

_RELEASE = """
-- KEYS: queue, inflight, instances; ARGV: instance
local entries = redis.call('HVALS', KEYS[2])
if #entries > 0 then redis.call('RPUSH', KEYS[1], unpack(entries)) end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return #entries
"""


@dataclass(frozen=True)
class Entry:
    product_id: int
    retry_times: int

    def encode(self) -> str:
        return f"{self.product_id}:{self.retry_times}"

    @classmethod
    def decode(cls, raw: bytes | str) -> Entry:
        text = raw.decode() if isinstance(raw, bytes) else raw
        product_id, retry_times = text.split(":", 1)
        return cls(int(product_id), int(retry_times))


@dataclass(frozen=True)
class PassState:
    pass_id: int
    start_id: int
    end_id: int
    cursor: int
    status: str
    done: int
    queued: int
    delayed: int

    @property
    def total(self) -> int:
        return self.end_id - self.start_id + 1


class RedisPass:
    """The Redis side of the shared pass, for one instance (synchronous client, batched calls)."""

    def __init__(self, client: redis.Redis, prefix: str, spider_name: str = "products") -> None:
        self.client = client
        # One hash tag for every key: a Redis Cluster keeps them in one slot,
        # so each script's keys are on one node (no CROSSSLOT).
        self.base = f"{{{prefix}}}:{spider_name}"
        self.instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.pass_id: int | None = None
        #: Set when the pass is created; tells this pass from a later one that got the same id
        #: (Redis lost everything, its id sequence included).
        self.token = ""
        self.start_id = 0
        self.end_id = 0
        #: The pass's done count as of the latest call that read it (acknowledge, done_count).
        self.last_done_count: int | None = None
        self._open = client.register_script(_OPEN)
        self._pop = client.register_script(_POP)
        self._push = client.register_script(_PUSH)
        self._ack = client.register_script(_ACK)
        self._recover = client.register_script(_RECOVER)
        self._release = client.register_script(_RELEASE)

    # keys
    @property
    def pass_key(self) -> str:
        return f"{self.base}:pass"

    def _key(self, name: str, pass_id: int | None = None) -> str:
        return f"{self.base}:pass:{self.pass_id if pass_id is None else pass_id}:{name}"

    @property
    def inflight_key(self) -> str:
        return self._key(f"inflight:{self.instance}")

    def heartbeat_key(self, instance: str | None = None) -> str:
        return f"{self.base}:instance:{instance or self.instance}"

    @property
    def total(self) -> int:
        return self.end_id - self.start_id + 1

    # operations
    def open(self, start_id: int, end_id: int, *, fresh: bool) -> bool:
        """Join the running pass over this range, or start a new one; True if joined."""
        pass_id, joined, token, replaced = self._open(
            keys=[self.pass_key, f"{self.base}:pass_seq"],
            args=[start_id, end_id, "1" if fresh else "0", uuid.uuid4().hex, FRESH_JOIN_WINDOW])
        self.pass_id, self.start_id, self.end_id = int(pass_id), start_id, end_id
        self.token = token.decode() if isinstance(token, bytes) else token
        if replaced:
            # Its instances, if any live, settle it too; if none does, nothing else would.
            self._expire(int(replaced))
        self.heartbeat({})
        return bool(joined)

    def pop(self, count: int) -> list[Entry]:
        """Lease up to ``count`` ids: due retries, then recovered ones, then fresh ones from the cursor."""
        raw = self._pop(keys=[self.pass_key, self._key("queue"), self._key("delayed"), self.inflight_key,
                              self._key("instances")], args=[count, self.instance, self.pass_id])
        return [Entry.decode(entry) for entry in raw]

    def push(self, entry: Entry, delay: float = 0.0) -> None:
        """Give an id back for another attempt (after ``delay`` seconds), ending our lease on it."""
        self._push(keys=[self._key("queue"), self._key("delayed"), self.inflight_key],
                   args=[entry.encode(), round(delay * 1000)])

    def acknowledge(self, product_ids: list[int]) -> int:
        """Mark ids done (their outcome is committed); returns the pass's done count.

        -1 means that this instance's pass is no longer the current one.
        """
        if not product_ids:
            return self.done_count()
        done = int(self._ack(keys=[self.pass_key, self._key("done"), self._key("done_count"), self.inflight_key],
                             args=[self.pass_id, FINISHED_TTL, *product_ids]))
        if done >= 0:
            self.last_done_count = done
        return done

    def recover(self) -> int:
        """Move the leases of instances whose heartbeat stopped back to the queue."""
        # The script declares every key it touches (Redis Cluster requires it), so
        # the instances are read first; one that joins meanwhile is alive anyway.
        instances = sorted(member.decode() for member in self.client.smembers(self._key("instances")))
        if not instances:
            return 0
        keys = [self._key("queue"), self._key("instances")]
        for instance in instances:
            keys += [self.heartbeat_key(instance), self._key(f"inflight:{instance}")]
        return int(self._recover(keys=keys, args=instances))

    def release(self) -> int:
        """Give back every lease this instance holds (a graceful stop)."""
        return int(self._release(keys=[self._key("queue"), self.inflight_key, self._key("instances")],
                                 args=[self.instance]))

    def heartbeat(self, status: dict[str, Any]) -> None:
        self.client.set(self.heartbeat_key(), json.dumps({"pass": self.pass_id, **status}), ex=HEARTBEAT_TTL)
        self.client.sadd(self._key("instances"), self.instance)

    def stop_heartbeat(self) -> None:
        self.client.delete(self.heartbeat_key())

    def done_count(self) -> int:
        self.last_done_count = int(self.client.get(self._key("done_count")) or 0)
        return self.last_done_count

    def started_at(self) -> float | None:
        """When the current pass began, in Unix seconds by the Redis server's clock."""
        raw = self.client.hget(self.pass_key, "started_at")
        return None if raw is None else float(raw)

    def state(self) -> PassState | None:
        """The current pass as Redis has it (None when there is none), whichever this instance is on."""
        fields = {k.decode(): v.decode() for k, v in self.client.hgetall(self.pass_key).items()}
        if not fields:
            return None
        pass_id = int(fields["id"])
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self._key("done_count", pass_id))
        pipe.llen(self._key("queue", pass_id))
        pipe.zcard(self._key("delayed", pass_id))
        done, queued, delayed = pipe.execute()
        return PassState(pass_id, int(fields["start"]), int(fields["end"]), int(fields["cursor"]),
                         fields["status"], int(done or 0), int(queued), int(delayed))

    def status(self) -> str:
        """What became of the pass this instance opened: RUNNING, FINISHED, REPLACED or LOST.

        LOST: Redis no longer has it (restarted without persistence, flushed,
        failed over to an empty replica), or has a different pass under its id.
        """
        raw_id, raw_status, raw_token = self.client.hmget(self.pass_key, ["id", "status", "token"])
        if raw_id is None:
            return LOST
        pass_id, token = int(raw_id), (raw_token or b"").decode()
        assert self.pass_id is not None, "open() first"
        if pass_id < self.pass_id or (pass_id == self.pass_id and token != self.token):
            return LOST  # the id sequence started again: everything was lost
        if pass_id > self.pass_id:
            return REPLACED
        return FINISHED if raw_status == b"finished" else RUNNING

    def is_finished(self) -> bool:
        """The pass this instance joined is over (complete, or replaced by a newer one)."""
        return self.status() in (FINISHED, REPLACED)

    def expire_finished(self) -> None:
        """Let a finished pass's keys go after a day; nothing is left to delete by hand."""
        assert self.pass_id is not None
        self._expire(self.pass_id)

    def _expire(self, pass_id: int) -> None:
        names = ["queue", "delayed", "done", "done_count", "instances"]
        names += [f"inflight:{member.decode()}" for member in self.client.smembers(self._key("instances", pass_id))]
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.expire(self._key(name, pass_id), FINISHED_TTL)
        pipe.execute()

    def instances(self) -> dict[str, dict[str, Any]]:
        """Live instances and their last heartbeat."""
        found = {}
        for key in self.client.scan_iter(f"{self.base}:instance:*", count=1000):
            raw = self.client.get(key)
            if raw:
                found[key.decode().rsplit(":instance:", 1)[1]] = json.loads(raw)
        return found
