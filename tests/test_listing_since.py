"""When a listing pass is incremental and from when, against real databases (SQLite and MariaDB).

``{since}`` in PRODUCT_LIST_URL becomes the start of the last complete pass
over the listing minus INCREMENTAL_LAG; the first pass, and every pass
FULL_PASS_EVERY asks for, lists everything (``{since}`` the epoch). What a
crawl would request is page 1's URL, read here from the ``ListingPass`` a crawl
opens; passes end as a crawl ends them (the page's mark written with its
products, then ``close``), and time passes by moving earlier passes'
``started_at`` back in the database.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import pytest
from scrapy.utils.defer import maybe_deferred_to_future

from productcrawler.config import CrawlConfig
from productcrawler.items import PageItem
from productcrawler.passes.listing import ListingPass
from productcrawler.storage.database import Database, DatabaseTarget, utcnow, write_batch
from tests.support.reactor import on_reactor_loop

if TYPE_CHECKING:
    from collections.abc import Iterator

    from productcrawler.storage.target import Dialect

SHOP = "https://shop.example/admin/api/2024-10/products.json?limit=250&updated_at_min={since}"
EPOCH = "1970-01-01T00:00:00Z"


@pytest.fixture(params=["sqlite", "mysql"])
def database(request, tmp_path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path}/products.db" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    database = Database(DatabaseTarget.from_url(url))
    database.pool.start()  # a crawl's reactor starts it; here there is no running reactor
    yield database
    database.pool.close()


def run(database: Database, function: Any, *args: Any) -> Any:
    return on_reactor_loop(maybe_deferred_to_future(database.run(function, *args)))


def listing_pass(database: Database, ends: str = "complete", *, fresh: bool = False, url: str = SHOP,
                 **settings: Any) -> tuple[int, str]:
    """A pass over the listing as a crawl runs it: (its pass id, the URL of its page 1).

    ``ends``: ``complete`` (page 1 stored), ``failed`` (page 1 given up after its retries, as a 5xx
    ends it), ``unfinished`` (the run stopped before page 1 was stored).
    """
    config = CrawlConfig.from_settings({"PRODUCT_LIST_URL": url, **settings})
    crawl_pass = ListingPass(database, config)
    on_reactor_loop(crawl_pass.open(fresh=fresh))
    assert crawl_pass.pass_id is not None
    first = crawl_pass.ids.first_url
    assert [entry.position for entry in on_reactor_loop(crawl_pass.lease(10)).entries] == [1]
    if ends != "unfinished":
        page = PageItem(1, first, [], {}, failure="http_503" if ends == "failed" else None,
                        http_status=503 if ends == "failed" else None)
        run(database, write_batch, [], [], crawl_pass.pass_id, (), [page])
        on_reactor_loop(crawl_pass.acknowledge([1]))
    assert on_reactor_loop(crawl_pass.close("finished", lost=False)) is (ends != "unfinished")
    return crawl_pass.pass_id, first


def since(url: str, name: str = "updated_at_min") -> str:
    """The ``{since}`` a page-1 URL asks for, as the API reads it (percent-decoded)."""
    return parse_qs(urlsplit(url).query)[name][0]


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def started(database: Database, pass_id: int, ago: timedelta) -> datetime:
    """Move a pass's start back to ``ago`` before now; the new start."""
    when = utcnow() - ago

    def move(cursor: Any, dialect: Dialect) -> None:
        cursor.execute(f"UPDATE crawl_passes SET started_at = {dialect.placeholder} WHERE pass_id = "
                       f"{dialect.placeholder}", (dialect.value(when), pass_id))

    run(database, move)
    return when


def recorded_since(database: Database, pass_id: int) -> Any:
    def read(cursor: Any, dialect: Dialect) -> Any:
        cursor.execute(f"SELECT list_since FROM crawl_passes WHERE pass_id = {dialect.placeholder}", (pass_id,))
        return cursor.fetchone()[0]

    return run(database, read)


@pytest.mark.parametrize(("lag", "seconds"), [(None, 300), ("90s", 90), ("0s", 0)])
def test_the_first_pass_lists_everything_and_the_next_lists_from_its_start_minus_the_lag(database, lag, seconds):
    settings = {} if lag is None else {"INCREMENTAL_LAG": lag}
    first, url = listing_pass(database, **settings)
    assert since(url) == EPOCH and recorded_since(database, first) is None
    began = started(database, first, timedelta(hours=1))
    second, url = listing_pass(database, **settings)
    assert since(url) == iso(began - timedelta(seconds=seconds))
    assert recorded_since(database, second) is not None


def test_a_failed_or_unfinished_pass_is_skipped_the_complete_one_before_counts(database):
    first, _ = listing_pass(database)
    began = started(database, first, timedelta(hours=3))
    failed, url = listing_pass(database, "failed")
    assert since(url) == iso(began - timedelta(minutes=5))
    started(database, failed, timedelta(hours=2))
    unfinished, url = listing_pass(database, "unfinished")
    assert since(url) == iso(began - timedelta(minutes=5))  # the failed pass counts for nothing
    started(database, unfinished, timedelta(hours=1))
    # The next run resumes the unfinished pass and its page 1, {since} included; --fresh gives it up.
    resumed, url = listing_pass(database, "unfinished")
    assert resumed == unfinished and since(url) == iso(began - timedelta(minutes=5))
    _, url = listing_pass(database, fresh=True)
    assert since(url) == iso(began - timedelta(minutes=5))


def test_a_listing_that_never_completed_lists_everything_until_it_does(database):
    listing_pass(database, "failed")
    _, url = listing_pass(database, "failed")
    assert since(url) == EPOCH
    listing_pass(database)
    _, url = listing_pass(database)
    assert since(url) != EPOCH


def test_full_pass_every_three_passes_makes_every_third_pass_after_a_full_one_full(database):
    full = []
    for _ in range(7):
        pass_id, url = listing_pass(database, FULL_PASS_EVERY="3")
        full.append(since(url) == EPOCH)
        started(database, pass_id, timedelta(hours=1))
    assert full == [True, False, False, True, False, False, True]
    # A failed pass is not one of the three: the full pass it was is asked for again.
    for ends, expected in (("complete", False), ("complete", False), ("failed", True), ("complete", True)):
        _, url = listing_pass(database, ends, FULL_PASS_EVERY="3")
        assert (since(url) == EPOCH) is expected


def test_full_pass_every_24h_comes_due_once_the_last_full_pass_began_24_hours_ago(database):
    full, _ = listing_pass(database, FULL_PASS_EVERY="24h")
    started(database, full, timedelta(hours=23, minutes=59))
    incremental, url = listing_pass(database, FULL_PASS_EVERY="24h")
    assert since(url) != EPOCH
    started(database, incremental, timedelta(minutes=30))
    started(database, full, timedelta(hours=24))
    _, url = listing_pass(database, FULL_PASS_EVERY="24h")
    assert since(url) == EPOCH


@pytest.mark.parametrize(("template", "spelled", "raw"), [
    ("{since}", "%Y-%m-%dT%H:%M:%SZ", "%3A"),
    ("{since:%Y-%m-%d %H:%M:%S}", "%Y-%m-%d %H:%M:%S", "%20"),
])
def test_since_is_written_in_iso_8601_utc_or_the_format_after_the_colon(database, template, spelled, raw):
    url = f"https://shop.example/rest/V1/products?pageSize=200&value={template}"
    first, page = listing_pass(database, url=url)
    assert since(page, "value") == datetime(1970, 1, 1).strftime(spelled)
    began = started(database, first, timedelta(hours=2))
    _, page = listing_pass(database, url=url)
    assert since(page, "value") == (began - timedelta(minutes=5)).strftime(spelled)
    assert raw in page  # percent-encoded in the URL
