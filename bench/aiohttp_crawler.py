"""The articles' crawler, as a peer to compare against: aiohttp + asyncio, no framework.

As the article builds it: a token bucket of capacity 2x the rate, a semaphore
of 1,000, a coroutine for every id created up front, one aiomysql upsert per
item, a Redis set of completed ids (skipped on restart), retries with
exponential backoff (and jitter). It writes the same ``products`` table as
the project (the project's DDL). Run by ``bench/peers.py``; alone::

    .venv/bin/python bench/aiohttp_crawler.py --base-url http://127.0.0.1:8931/v1 \
        --start 1 --end 20000 --rate 500 --database bench_x --redis-key bench:x:done

It prints one JSON line of counters at the end; ``--max-seconds`` stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import aiomysql
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from productcrawler.storage.schema import MYSQL_DDL

UPSERT = ("INSERT INTO products (product_id, name, price, stock, category, brand, rating, sales_count, "
          "update_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
          "name = VALUES(name), price = VALUES(price), stock = VALUES(stock), category = VALUES(category), "
          "brand = VALUES(brand), rating = VALUES(rating), sales_count = VALUES(sales_count), "
          "update_time = VALUES(update_time)")
RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


class TokenBucket:
    """Tokens refill at ``rate`` per second up to ``capacity``; acquire() waits for one."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = time.monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
                self.updated = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.rate)


class Crawler:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.bucket = TokenBucket(args.rate, 2 * args.rate)
        self.semaphore = asyncio.Semaphore(args.concurrency)
        self.counts = {"stored": 0, "missing": 0, "failed": 0, "retries": 0, "requests": 0}

    async def run(self) -> dict[str, Any]:
        args = self.args
        # redis-py 8's default pool raises "Too many connections" past 100
        # at once; with 1,000 coroutines in flight a loaded machine gets there.
        # A blocking pool of the same size waits for a free connection instead.
        self.redis = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
            args.redis_url, max_connections=100))
        self.pool = await aiomysql.create_pool(host="127.0.0.1", port=3306, user="root", password="",
                                               db=args.database, charset="utf8mb4", autocommit=True,
                                               minsize=1, maxsize=args.db_pool)
        async with self.pool.acquire() as conn, conn.cursor() as cursor:
            for statement in MYSQL_DDL:
                await cursor.execute(statement)
        done = {int(x) for x in await self.redis.smembers(args.redis_key)}
        timeout = aiohttp.ClientTimeout(total=30, connect=5, sock_read=10)
        connector = aiohttp.TCPConnector(limit=args.concurrency)
        started = time.monotonic()
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            self.session = session
            # Every id's coroutine up front, as the article does.
            tasks = [asyncio.ensure_future(self.fetch(pid)) for pid in range(args.start, args.end + 1)
                     if pid not in done]
            try:
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=args.max_seconds)
                reason = "finished"
            except TimeoutError:
                reason = "max_seconds"
        elapsed = time.monotonic() - started
        self.pool.close()
        await self.pool.wait_closed()
        await self.redis.aclose()
        return {**self.counts, "elapsed": elapsed, "reason": reason}

    async def fetch(self, product_id: int) -> None:
        url = f"{self.args.base_url}/product/{product_id}"
        async with self.semaphore:
            for attempt in range(self.args.max_retries + 1):
                await self.bucket.acquire()
                self.counts["requests"] += 1
                try:
                    async with self.session.get(url) as response:
                        if response.status == 200:
                            data = await response.json(content_type=None)
                            await self.save(product_id, data)
                            self.counts["stored"] += 1
                            await self.redis.sadd(self.args.redis_key, product_id)
                            return
                        if response.status == 404:
                            self.counts["missing"] += 1
                            await self.redis.sadd(self.args.redis_key, product_id)
                            return
                        if response.status not in RETRY_STATUSES:
                            break
                except (TimeoutError, aiohttp.ClientError, ValueError):
                    pass
                self.counts["retries"] += 1
                delay = min(self.args.backoff_base * 2 ** attempt, 60.0)
                await asyncio.sleep(delay * random.uniform(0.5, 1.5))
        self.counts["failed"] += 1

    async def save(self, product_id: int, data: dict[str, Any]) -> None:
        row = (product_id, str(data.get("name", ""))[:255], _decimal(data.get("price")), data.get("stock"),
               _text(data.get("category")), _text(data.get("brand")), _decimal(data.get("rating")),
               data.get("sales_count"), datetime.now(UTC).replace(tzinfo=None, microsecond=0))
        async with self.pool.acquire() as conn, conn.cursor() as cursor:
            await cursor.execute(UPSERT, row)


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(Decimal("0.01"))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:100]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--start", type=int, default=1)
    parser.add_argument("--end", type=int, required=True)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--max-retries", type=int, default=3)
    parser.add_argument("--backoff-base", type=float, default=1.0)
    parser.add_argument("--database", required=True)
    parser.add_argument("--db-pool", type=int, default=10)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--redis-key", required=True)
    parser.add_argument("--max-seconds", type=float, default=None)
    args = parser.parse_args()
    result = asyncio.run(Crawler(args).run())
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
