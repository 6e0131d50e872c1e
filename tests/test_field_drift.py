"""Field drift (GUARD_FIELD_DRIFT): an API that loses a field stops the crawl before any row is harmed.

Against an imitation of a product API whose answers change shape between passes
(tests/support/imitations/drifting_api.py), with real SQLite and MariaDB: a first
complete pass, then the same API with ``price`` moved to ``pricing.current``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.support.crawls import crawl_env, run_crawl
from tests.support.imitations.drifting_api import MISSING_EVERY, DriftingApi, stored_row
from tests.support.logs import dumped_stat, log_lines
from tests.support.services import REDIS_URL, query

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

END = 400
FAST = {"MAX_REQUESTS_PER_SECOND": 2000}
PRESENT = [i for i in range(1, END + 1) if i % MISSING_EVERY]
COLUMNS = "product_id, name, price, stock, category, brand, rating, sales_count, update_time, pass_id"


@pytest.fixture(scope="module")
def api_server() -> Iterator[DriftingApi]:
    with DriftingApi() as api:
        yield api


@pytest.fixture
def api(api_server: DriftingApi) -> DriftingApi:
    api_server.reset()
    return api_server


@pytest.fixture(params=["sqlite", "mysql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/products.db"
    return request.getfixturevalue("mysql_url")


def crawl(api: DriftingApi, database: str, **settings: Any) -> Any:
    return run_crawl("-a", f"end_id={END}", settings={**FAST, **settings},
                     env=crawl_env(API_BASE_URL=api.base_url, DATABASE_URL=database))


def products(database: str) -> list[tuple[Any, ...]]:
    return query(database, f"SELECT {COLUMNS} FROM products ORDER BY product_id")


def assert_stored(database: str, version: int) -> None:
    """Every product row holds catalogue ``version``'s values, column by column."""
    rows = products(database)
    assert [row[0] for row in rows] == PRESENT
    for row in rows:
        expected = stored_row(row[0], version)
        assert row[:2] == expected[:2]
        assert f"{float(row[2]):.2f}" == str(expected[2]), row  # SQLite keeps a DECIMAL as a number
        assert row[3:6] == expected[3:6], row
        assert f"{float(row[6]):.2f}" == str(expected[6]), row
        assert row[7] == expected[7], row


def test_a_moved_field_stops_the_next_pass_with_exit_3_and_every_stored_value_intact(
        api: DriftingApi, database: str) -> None:
    first = crawl(api, database)
    assert first.returncode == 0, first.stderr[-3000:]  # the first pass has nothing to compare with
    assert_stored(database, 1)
    before = products(database)

    api.shape(version=2, move={"price": "pricing.current"})
    arrived = len(api.arrivals())
    second = crawl(api, database)
    assert second.returncode == 3, second.stderr[-3000:]
    # It stopped early: the 100 answers it held and those in flight, not the whole range.
    asked = [arrival["path"] for arrival in api.arrivals()[arrived:]]
    assert 100 <= len(asked) < END and all(path.startswith("/v1/product/") for path in asked)
    [error] = log_lines(second.stderr, "ERROR")
    assert "Stopping the crawl: field drift" in error
    assert "price (non-NULL in 100% of the 392 products pass 1 stored" in error
    assert "absent or unparseable in 100 of this run's first 100 answers" in error
    assert ("the answers now carry the keys: product_id, name, stock, category, brand, rating, sales_count, "
            "pricing.current;") in error
    assert "price=<its new path>" in error
    for column in ("stock", "category", "brand", "rating", "sales_count"):
        assert f"{column} (non-NULL" not in error  # still there: not named
    # Not one product row was written by the second pass: every value of the first is intact.
    assert products(database) == before
    assert dumped_stat(second.stderr, "cleaning/absent/price") >= 100
    assert dumped_stat(second.stderr, "productcrawler/stored") is None

    # Resumed, the pass still compares with pass 1 (the last complete one) and stops again.
    third = crawl(api, database)
    assert third.returncode == 3, third.stderr[-3000:]
    assert "Resuming pass 2" in third.stderr
    assert "pass 1 stored" in log_lines(third.stderr, "ERROR")[0]
    assert products(database) == before

    # Mapped with PRODUCT_FIELDS, the pass completes with the new values.
    fixed = crawl(api, database, PRODUCT_FIELDS="price=pricing.current")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert_stored(database, 2)


def test_a_column_null_all_along_and_a_small_dropout_do_not_trip(api: DriftingApi, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/products.db"
    # rating: in no answer, ever. brand: absent from every 25th product (4 %).
    api.shape(drop=["rating"], dropout={"brand": 25})
    first = crawl(api, database)
    assert first.returncode == 0, first.stderr[-3000:]
    api.shape(version=2)
    second = crawl(api, database)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not log_lines(second.stderr, "ERROR")
    rows = products(database)
    assert [row[0] for row in rows] == PRESENT
    assert all(row[6] is None for row in rows)  # rating: NULL all along
    assert [row[0] for row in rows if row[5] is None] == [i for i in PRESENT if i % 25 == 0]
    assert all(row[1] == stored_row(row[0], 2)[1] for row in rows)  # the second pass wrote its values
    assert dumped_stat(second.stderr, "cleaning/absent/rating") == len(PRESENT)
    assert dumped_stat(second.stderr, "cleaning/absent/brand") == len([i for i in PRESENT if i % 25 == 0])


def test_a_first_pass_against_an_api_without_a_field_does_not_trip(api: DriftingApi, tmp_path: Path) -> None:
    api.shape(move={"price": "pricing.current"})
    result = crawl(api, f"sqlite:///{tmp_path}/products.db")
    assert result.returncode == 0, result.stderr[-3000:]
    assert all(row[2] is None for row in products(f"sqlite:///{tmp_path}/products.db"))


def test_off_with_0(api: DriftingApi, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/products.db"
    assert crawl(api, database).returncode == 0
    api.shape(version=2, move={"price": "pricing.current"})
    result = crawl(api, database, GUARD_FIELD_DRIFT=0)
    assert result.returncode == 0, result.stderr[-3000:]
    assert all(row[2] is None for row in products(database))


def test_a_redis_shared_pass_stops_too(api: DriftingApi, mysql_url: str, redis_prefix: str) -> None:
    env = crawl_env(API_BASE_URL=api.base_url, DATABASE_URL=mysql_url, REDIS_URL=REDIS_URL,
                    REDIS_KEY_PREFIX=redis_prefix)
    first = run_crawl("-a", f"end_id={END}", settings=FAST, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    before = products(mysql_url)
    api.shape(version=2, drop=["stock"])
    second = run_crawl("-a", f"end_id={END}", settings=FAST, env=env)
    assert second.returncode == 3, second.stderr[-3000:]
    [error] = log_lines(second.stderr, "ERROR")
    assert "stock (non-NULL in 100% of the 392 products pass" in error
    assert "the answers now carry the keys: product_id, name, price, category, brand, rating, sales_count;" in error
    assert products(mysql_url) == before


def test_a_declared_column_that_vanishes_trips_too(api: DriftingApi, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/products.db"
    first = crawl(api, database, PRODUCT_COLUMNS="maker:text(32)=brand")
    assert first.returncode == 0, first.stderr[-3000:]
    api.shape(version=2, move={"brand": "vendor.name"})
    # brand is mapped to its new place; the declared column still points at the old one.
    second = crawl(api, database, PRODUCT_COLUMNS="maker:text(32)=brand", PRODUCT_FIELDS="brand=vendor.name")
    assert second.returncode == 3, second.stderr[-3000:]
    [error] = log_lines(second.stderr, "ERROR")
    assert "maker (non-NULL in 100% of the 392 products pass 1 stored" in error
    assert "brand (non-NULL" not in error
