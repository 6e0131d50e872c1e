"""One pass shared by every instance through Redis: lazy seeding, leases, acknowledgement.

Keys, under ``{REDIS_KEY_PREFIX}:products`` (the braces are literal: the
prefix is the keys' Redis Cluster hash tag, and every script declares its keys;
:class:`~productcrawler.redis_keys.PassKeys` names them):

- ``pass`` (hash): the current pass: ``ids`` (which id list: ``range:START-END``, or
  ``file:SHA256:COUNT``), ``start`` and ``end`` (its positions, 1..N), ``cursor``
  (next position never handed out), ``status`` (``running``/``finished``), times.
- ``pass:{id}:queue`` (list): positions to fetch again (retries due now, leases
  recovered from dead instances). Entries are ``"<position>:<retry_times>"``.
- ``pass:{id}:delayed`` (zset): retries that must wait, scored by the Redis
  server's clock in ms, so no instance's clock skew can send one early.
- ``pass:{id}:inflight:{instance}`` (hash): ids an instance holds, until their
  outcome is committed to the database (the lease).
- ``pass:{id}:done`` (bitmap) and ``pass:{id}:done_count``: positions with a
  committed outcome. Set only after the database commit.
- ``pass:{id}:instances`` (set) and ``instance:{instance}`` (heartbeat, TTL).

Seeding is a cursor: positions are handed out from it in small batches when the
queue is empty, so a pass of any size costs Redis a bitmap of one bit per id.
Redis sees positions only (each instance maps them to ids: ``productcrawler/ids``),
so its Lua numbers stay small whatever the ids, and every instance of a pass over
a file must have the same file: the pass records its digest and count, and an
instance with another list is refused at start.
An instance that dies (even ``kill -9``) stops its heartbeat; any live
instance then moves its leases back to the queue. Duplicated fetches after a
crash are possible; lost ids are not.

The pass also has a row in the database's ``crawl_passes`` (``record.py``):
every product and failure row it writes carries that row's id, and the
complete pass's summary is written there.

The client is redis-py's asyncio client on the reactor's event loop: a call
waits for Redis without holding the reactor, and no thread is involved.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from productcrawler.config import DEFAULTS, ConfigError
from productcrawler.ids import RangeIds
from productcrawler.instance import instance_name
from productcrawler.passes import redis_scripts
from productcrawler.passes.base import FINISHED, LOST, REPLACED, RUNNING, Entry, Lease
from productcrawler.redis_connection import reply_text
from productcrawler.redis_keys import SPIDER, Keys

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from productcrawler.ids import IdSource
    from productcrawler.ids.failed import FailedIds
    from productcrawler.passes.record import SharedPassRecord
    from productcrawler.redis_connection import AsyncClient

logger = logging.getLogger(__name__)

#: Seconds a finished pass's keys are kept, for inspection.
FINISHED_TTL = 24 * 3600
#: Error replies that mean "not now" (loading, a replica being promoted, a cluster
#: failing over), not "wrong": the call is tried again.
_TRANSIENT_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY")
#: Instances given fresh=1 within this many seconds of a pass that fresh=1
#: started join it rather than start one each (several instances started together).
FRESH_JOIN_WINDOW = 30


def refusal(pass_id: int, running: str, ours: IdSource, *, failed: bool = False) -> str:
    """Why an instance cannot join the running pass ``pass_id`` over ``running`` (its descriptor)."""
    kind, _, rest = running.partition(":")
    if kind == "file":
        digest, _, count = rest.partition(":")
        theirs = f"a file of {count} ids with SHA-256 {digest[:16]}"
    elif kind == "range":
        theirs = f"ids {rest.replace('-', '..')}"
    else:
        theirs = "another id list"
    name = "the ids recorded failed" if failed else "PRODUCT_IDS"
    return (f"{name}: the shared pass {pass_id} in Redis runs over {theirs}, this instance over "
            f"{ours.describe()}; give every instance the same ids, or -a fresh=1 to start a new pass")


def refused(running: str, ours: str) -> bool:
    """OPEN's rule: an instance is refused a running pass over another id list when either list is a file."""
    return running != ours and (running.startswith("file:") or ours.startswith("file:"))


@dataclass(frozen=True)
class PassState:
    pass_id: int
    #: Which id list (``range:START-END`` or ``file:SHA256:COUNT``; empty for a pass of an earlier version).
    ids: str
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
    """The Redis side of the shared pass, for one instance."""

    #: The queue is another process's to fill: look again twice a second.
    poll_interval = 0.5
    #: Whether positions are added as the pass runs (a listing's pages), so instances join it whatever its end.
    grows = False
    #: For a listing pass, LIST_REMOVALS (its summary then removes what a complete listing lacked); None by id.
    listing_removals: bool | None = None

    def __init__(self, client: AsyncClient, prefix: str, ids: IdSource | None,
                 spider_name: str = SPIDER, instance: str | None = None,
                 heartbeat_ttl: float = DEFAULTS["REDIS_HEARTBEAT_TTL"],
                 read_failed: Callable[[], Awaitable[FailedIds]] | None = None,
                 record: SharedPassRecord | None = None) -> None:
        """``ids``: the id list; None with ``read_failed``, which reads the failed ids as the pass opens."""
        self.client = client
        #: The pass's row in crawl_passes (None: rows carry no pass, as for tools that only read Redis).
        self.record = record
        #: The crawl_passes id every row written in this pass carries (``record.py``); None without a record.
        self.row_stamp: int | None = None
        # One hash tag for every key: a Redis Cluster keeps them in one slot,
        # so each script's keys are on one node (no CROSSSLOT).
        self.keys = Keys(prefix).passes(spider_name)
        self.instance = instance or instance_name()
        #: Seconds without a heartbeat after which this instance counts as dead (REDIS_HEARTBEAT_TTL).
        self.heartbeat_ttl = heartbeat_ttl
        self.ids: IdSource = ids if ids is not None else RangeIds(1, 0)
        self.total = 0 if ids is None else ids.total
        self._read_failed = read_failed
        self.failed: FailedIds | None = None
        self.pass_id: int | None = None
        #: Set when the pass is created; tells this pass from a later one that got the same id
        #: (Redis lost everything, its id sequence included).
        self.token = ""
        self.started_at: float | None = None  # Unix seconds, by the Redis server's clock
        self.done_at_start = 0
        #: The pass's done count as of the latest call that read it (acknowledge, beat).
        self.last_done_count: int | None = None
        self._open = client.register_script(redis_scripts.OPEN)
        self._pop = client.register_script(redis_scripts.POP)
        self._push = client.register_script(redis_scripts.PUSH)
        self._ack = client.register_script(redis_scripts.ACK)
        self._recover = client.register_script(redis_scripts.RECOVER)
        self._release = client.register_script(redis_scripts.RELEASE)

    @staticmethod
    def is_unavailable(error: BaseException) -> bool:
        """Redis is away for now (retried by the next beat or poll), as opposed to a bug of ours."""
        if isinstance(error, redis.ResponseError):
            # An error reply is a bug (a script's, a wrong type) unless Redis says it is not ready.
            return str(error).startswith(_TRANSIENT_REPLIES)
        return isinstance(error, redis.RedisError)

    # keys
    @property
    def pass_key(self) -> str:
        return self.keys.current

    def key(self, name: str, pass_id: int | None = None) -> str:
        return self.keys.of_pass(self.pass_id if pass_id is None else pass_id, name)

    #: Keys of a pass that a subclass adds (expired with the others).
    extra_keys: tuple[str, ...] = ()

    @property
    def inflight_key(self) -> str:
        return self.key(f"inflight:{self.instance}")

    def heartbeat_key(self, instance: str | None = None) -> str:
        return self.keys.heartbeat(instance or self.instance)

    # the pass interface (base.Pass)
    @property
    def empty(self) -> bool:
        """Opened over no ids at all (ids=failed, and none failed): no pass in Redis."""
        return self.pass_id is None and self.total == 0

    async def open(self, *, fresh: bool) -> str:
        """Join the running pass over this id list, or start a new one."""
        if self._read_failed is not None:
            self.failed = await self._read_failed()
            if self.failed.ids is None:
                return self.failed.nothing_to_fetch()
            self.ids, self.total = self.failed.ids, self.failed.ids.total
        reply = await self._open(
            keys=[self.pass_key, self.keys.sequence],
            args=[1, self.total, "1" if fresh else "0", uuid.uuid4().hex, FRESH_JOIN_WINDOW, self.ids.descriptor,
                  "1" if self.grows else "0"])
        if reply[0] == b"refused":
            raise ConfigError(refusal(int(reply[1]), reply[2].decode(), self.ids,
                                      failed=self.failed is not None))
        pass_id, joined, token, replaced = reply
        self.pass_id = int(pass_id)
        self.token = token.decode() if isinstance(token, bytes) else token
        if replaced:
            # Its instances, if any live, settle it too; if none does, nothing else would.
            await self._expire(int(replaced))
        await self._heartbeat({})
        self.done_at_start = await self.done_count()
        raw_started, raw_end = await self.client.hmget(self.pass_key, ["started_at", "end"])
        self.started_at = None if raw_started is None else float(raw_started)
        if self.grows and raw_end is not None:
            # A joined listing is as long as the pages Redis knows of, not the one page this instance knows.
            self.total = max(self.total, int(raw_end))
        if self.record is not None:
            self.row_stamp = await self.record.open(
                self.token, self.ids, self.started_at,
                source_pass_id=None if self.failed is None else self.failed.source_pass)
        described = self.ids.describe() if self.failed is None else self.failed.describe()
        return (f"{'Joined' if joined else 'Started'} pass {self.pass_id} over {described} "
                f"through Redis as instance {self.instance} ({self.done_at_start} of {self.total} done)")

    async def lease(self, count: int) -> Lease:
        """Lease up to ``count`` positions: due retries, then recovered ones, then fresh ones from the cursor."""
        if self.empty:
            return Lease([], FINISHED)
        assert self.pass_id is not None, "open() first"
        raw = await self._pop(keys=[self.pass_key, self.key("queue"), self.key("delayed"), self.inflight_key,
                                    self.key("instances")], args=[count, self.instance, self.pass_id, self.token])
        if raw:
            return Lease([Entry.decode(entry) for entry in raw])
        return Lease([], await self.status())

    async def push(self, retries: list[tuple[Entry, float]]) -> None:
        """Give ids back for another attempt (each after its delay), ending our lease on them.

        One script call for all of them: a burst of retries (a 503 storm) is one round trip, not one each.
        """
        if not retries:
            return
        args: list[Any] = [self.pass_id, self.token]
        for entry, delay in retries:
            args += [entry.encode(), round(delay * 1000)]
        await self._push(keys=[self.key("queue"), self.key("delayed"), self.inflight_key, self.pass_key], args=args)

    async def acknowledge(self, positions: list[int], revealed: dict[int, str] | None = None) -> str:
        """Mark positions done (their outcome is committed): FINISHED once the whole pass is.

        When this instance's pass is no longer the current one, RUNNING: the
        next lease or beat finds out what became of it and says so.
        """
        if not positions:
            return RUNNING
        assert self.pass_id is not None, "open() first"
        done = int(await self._ack(keys=[self.pass_key, self.key("done"), self.key("done_count"),
                                         self.inflight_key, self.key("queue"), self.key("delayed"),
                                         self.key("instances")],
                                   args=[self.pass_id, self.token, FINISHED_TTL, *positions]))
        if done < 0:
            return RUNNING
        self.last_done_count = done
        return FINISHED if done >= self.total else RUNNING

    async def beat(self, status: dict[str, Any]) -> tuple[str, int]:
        """Heartbeat, take back dead instances' leases, refresh the done count."""
        if self.empty:
            return FINISHED, 0
        pass_status = await self.status()
        if pass_status == LOST:
            return pass_status, 0  # no heartbeat into keys of a pass that is gone
        await self._heartbeat(status)
        recovered = await self._recover_dead()
        await self.done_count()  # the count the progress line and metrics show
        return pass_status, recovered

    async def give_back_lost(self) -> int:
        """Give back every lease Redis holds for us (we hold none: they came from a lost reply)."""
        if self.empty:
            return 0
        return await self._release_all()

    def done(self, this_run: int) -> int:
        """Ids of the pass with an outcome, by every instance: Redis's count as of this
        instance's latest acknowledgement or heartbeat (no Redis call here)."""
        # this_run can count an id twice (fetched again after its lease was recovered).
        estimate = min(self.total, self.done_at_start + this_run)
        latest = self.last_done_count
        return estimate if latest is None else max(latest, estimate)

    async def close(self, reason: str, *, lost: bool) -> bool:
        """Give back every lease, stop the heartbeat; True if the pass is over."""
        try:
            return await self._settle(lost=lost)
        finally:
            self.ids.close()
            if self.failed is not None:
                self.failed.remove()

    async def _settle(self, *, lost: bool) -> bool:
        if self.pass_id is None:
            return False
        if not lost:
            released = await self._release_all()
            if released:
                logger.info("Gave %d leased ids back to the shared queue", released)
        await self.client.delete(self.heartbeat_key())
        if lost:
            return False
        status = await self.status()
        if status == FINISHED and self.record is not None and self.row_stamp is not None:
            await self.record.finish(self.row_stamp, self.ids, listing_removals=self.listing_removals)
        if status in (FINISHED, REPLACED):
            await self._expire(self.pass_id)
            return True
        return False

    # reading the pass
    async def done_count(self) -> int:
        self.last_done_count = int(await self.client.get(self.key("done_count")) or 0)
        return self.last_done_count

    async def status(self) -> str:
        """What became of the pass this instance opened: RUNNING, FINISHED, REPLACED or LOST.

        LOST: Redis no longer has it (restarted without persistence, flushed,
        failed over to an empty replica), or has a different pass under its id.
        """
        raw_id, raw_status, raw_token = await self.client.hmget(self.pass_key, ["id", "status", "token"])
        if raw_id is None:
            return LOST
        pass_id, token = int(raw_id), reply_text(raw_token or b"")
        assert self.pass_id is not None, "open() first"
        if pass_id < self.pass_id or (pass_id == self.pass_id and token != self.token):
            return LOST  # the id sequence started again: everything was lost
        if pass_id > self.pass_id:
            return REPLACED
        return FINISHED if raw_status == b"finished" else RUNNING

    async def state(self) -> PassState | None:
        """The current pass as Redis has it (None when there is none), whichever this instance is on."""
        fields = {reply_text(k): reply_text(v) for k, v in (await self.client.hgetall(self.pass_key)).items()}
        if not fields:
            return None
        pass_id = int(fields["id"])
        done = await self.client.get(self.key("done_count", pass_id))
        queued = await self.client.llen(self.key("queue", pass_id))
        delayed = await self.client.zcard(self.key("delayed", pass_id))
        return PassState(pass_id, fields.get("ids", ""), int(fields["start"]), int(fields["end"]),
                         int(fields["cursor"]), fields["status"], int(done or 0), int(queued), int(delayed))

    async def instances(self) -> dict[str, dict[str, Any]]:
        """Live instances and their last heartbeat."""
        found = {}
        async for key in self.client.scan_iter(self.keys.heartbeats, count=1000):
            raw = await self.client.get(key)
            if raw:
                found[key.decode().rsplit(":instance:", 1)[1]] = json.loads(raw)
        return found

    # the rest
    async def _heartbeat(self, status: dict[str, Any]) -> None:
        await self.client.set(self.heartbeat_key(), json.dumps({"pass": self.pass_id, **status}),
                              px=round(self.heartbeat_ttl * 1000))
        await self.client.sadd(self.key("instances"), self.instance)

    async def _recover_dead(self) -> int:
        """Move the leases of instances whose heartbeat stopped back to the queue."""
        # The script declares every key it touches (Redis Cluster requires it), so
        # the instances are read first; one that joins meanwhile is alive anyway.
        instances = sorted(reply_text(member) for member in await self.client.smembers(self.key("instances")))
        if not instances:
            return 0
        keys = [self.key("queue"), self.key("instances")]
        for instance in instances:
            keys += [self.heartbeat_key(instance), self.key(f"inflight:{instance}")]
        return int(await self._recover(keys=keys, args=instances))

    async def _release_all(self) -> int:
        return int(await self._release(keys=[self.key("queue"), self.inflight_key, self.key("instances")],
                                       args=[self.instance]))

    async def _expire(self, pass_id: int) -> None:
        """Let a finished or replaced pass's keys go after FINISHED_TTL; nothing is left to delete by hand."""
        names = ["queue", "delayed", "done", "done_count", "instances", *self.extra_keys]
        names += [f"inflight:{reply_text(member)}"
                  for member in await self.client.smembers(self.key("instances", pass_id))]
        for name in names:
            await self.client.expire(self.key(name, pass_id), FINISHED_TTL)
