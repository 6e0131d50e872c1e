"""``scrapy progress``: where the current pass stands, across every instance.

Reads Redis when REDIS_URL is set (the shared pass and each live instance's
heartbeat), else the database's pass ledger. Safe to run while crawls run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any, ClassVar

from redis.exceptions import RedisClusterException, RedisError
from scrapy.addons import AddonManager
from scrapy.commands import ScrapyCommand

from productcrawler.commands.preflight import connect_database
from productcrawler.config import ConfigError, CrawlConfig, mask_url
from productcrawler.config.driver_errors import describe
from productcrawler.passes.database_sql import as_datetime, outcome_counts
from productcrawler.passes.listing_sql import known_pages
from productcrawler.passes.redis_pass import RedisPass
from productcrawler.redis_connection import async_redis_client

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    # It reads the ledger or Redis and prints: no crawler process, so no reactor and no event loop left
    # unclosed at exit (asyncio's "Exception ignored in BaseEventLoop.__del__" on stderr after the answer).
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def short_desc(self) -> str:
        return "Show the progress of the current pass (all instances)"

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        AddonManager.load_pre_crawler_settings(self.settings)  # the contract, as a crawler process fills it
        try:
            config = CrawlConfig.from_settings(self.settings)
            lines = _from_redis(config) if config.redis.url else _from_database(config)
        except (ConfigError, OSError) as error:
            print(f"productcrawler: {error}", file=sys.stderr)
            self.exitcode = 2
            return
        except (RedisError, RedisClusterException) as error:
            print(f"productcrawler: REDIS_URL={mask_url(config.redis.url)!r}: cannot reach Redis: "
                  f"{describe(error, config.redis.url or '', tls_option='ssl_ca_certs')}", file=sys.stderr)
            self.exitcode = 2
            return
        print("\n".join(lines))


def _from_redis(config: CrawlConfig) -> list[str]:
    return asyncio.run(_read_redis(config))


async def _read_redis(config: CrawlConfig) -> list[str]:
    assert config.redis.url is not None
    client = async_redis_client(config.redis.url)
    try:
        redis_pass = RedisPass(client, config.redis.key_prefix, None)
        state = await redis_pass.state()
        instances = await redis_pass.instances()
    finally:
        await client.aclose()
    if state is None:
        return ["No pass has started yet."]
    percent = 100.0 * state.done / state.total
    lines = [f"Pass {state.pass_id} ({state.status}): {state.done}/{state.total} ids done ({percent:.1f} %), "
             f"{_id_list(state.ids)}; {state.queued} queued, {state.delayed} retries waiting, "
             f"{max(state.end_id - state.cursor + 1, 0)} not handed out yet"]
    total_rate = sum(float(beat.get("rate") or 0) for beat in instances.values())
    if total_rate > 0 and state.status == "running":
        lines.append(f"Rate {total_rate:.0f} ids/s, ETA {(state.total - state.done) / total_rate:.0f} s")
    lines.append(f"{len(instances)} live instance(s):")
    now = time.time()
    for name, beat in sorted(instances.items()):
        lines.append(f"  {name}: pass {beat.get('pass')}, {beat.get('stored', 0)} stored, "
                     f"{beat.get('missing', 0)} missing, {beat.get('failed', 0)} failed, "
                     f"{beat.get('rate', 0)} ids/s, last heartbeat {now - float(beat.get('at') or now):.0f} s ago")
    return lines


def _id_list(descriptor: str) -> str:
    """A shared pass's id list (``range:START-END`` or ``file:SHA256:COUNT``) for the progress line."""
    kind, _, rest = descriptor.partition(":")
    if kind == "file":
        digest, _, count = rest.partition(":")
        return f"a file of {count} ids (SHA-256 {digest[:16]})"
    if kind == "listing":
        return "a listing's pages"
    return f"ids {rest.replace('-', '..')}" if kind == "range" else "ids"


def _from_database(config: CrawlConfig) -> list[str]:
    target, connection = connect_database(config.storage.database_url)
    try:
        cursor = connection.cursor()
        try:
            cursor.execute("SELECT pass_id, start_id, end_id, started_at, finished_at, ids_digest, ids_count "
                           "FROM crawl_passes ORDER BY pass_id DESC LIMIT 1")
        except Exception:  # noqa: BLE001 - no tables yet
            return ["No pass has started yet."]
        row = cursor.fetchone()
        if row is None:
            return ["No pass has started yet."]
        pass_id, start_id, end_id, started_at, finished_at, digest, count = row
        started = as_datetime(started_at)
        first, last = (None, None) if digest else (start_id, end_id)
        counts = outcome_counts(cursor, target.dialect, first, last, pass_id)
        # Each id has one current outcome row: the counts add up to the ids done.
        done = sum(counts.values())
        listing = bool(digest) and not count  # a pass over a listing's pages (passes/listing_sql.py)
        if listing:
            pages = known_pages(cursor, target.dialect, pass_id)
    finally:
        connection.close()
    status = f"finished {finished_at}" if finished_at else "running or interrupted"
    if listing:
        pages_done = sum(1 for _, _, page_done in pages if page_done)
        return [f"Pass {pass_id} ({status}): {pages_done} of the {len(pages)} listing pages known so far done, "
                f"started {started} UTC; {counts['stored']} products stored"]
    total = int(count) if digest else end_id - start_id + 1
    described = f"a file of {count} ids (SHA-256 {digest[:16]})" if digest else f"ids {start_id}..{end_id}"
    return [f"Pass {pass_id} ({status}): {done}/{total} ids done ({100.0 * done / total:.1f} %), "
            f"{described}, started {started} UTC; {counts['stored']} stored, "
            f"{counts['missing']} missing, {counts['failed']} failed"]
