"""Experiments on components the bench does not own: measure a code change before proposing it.

Nothing here is used by the crawl unless a bench run selects it with ``-s``:

- ``TimedAckScheduler`` (SCHEDULER): the Redis scheduler acknowledging
  committed ids every ``ACK_INTERVAL`` seconds (or ``ACK_BATCH`` ids) instead
  of once per committed database batch.

(The other experiment, one ``DELETE ... IN`` per batch instead of pymysql's
per-row ``executemany`` DELETE, is in ``storage/database.py`` since c31b91f.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.task import LoopingCall

from productcrawler.schedulers.redis import RedisScheduler

if TYPE_CHECKING:
    from scrapy import Spider

ACK_INTERVAL = 0.25
ACK_BATCH = 1000


class TimedAckScheduler(RedisScheduler):
    def open(self, spider: Spider) -> None:
        super().open(spider)
        self._ack_timer = LoopingCall(self._flush_acks)
        self._ack_timer.start(ACK_INTERVAL, now=False)

    def close(self, reason: str) -> None:
        if self._ack_timer.running:
            self._ack_timer.stop()
        super().close(reason)

    def _committed(self, products: list[Any], failures: list[Any]) -> None:
        self._unacked.extend(item.product_id for item in products)
        self._unacked.extend(item.product_id for item in failures)
        if len(self._unacked) >= ACK_BATCH:
            self._flush_acks()
