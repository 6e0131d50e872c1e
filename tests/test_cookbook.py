"""The cookbook's recipes (docs/cookbook.md), each crawled for real against its API's imitation.

Rows column by column, the missing ids recorded, no 401/403 at the API, and
the secret nowhere: not in the crawl's output, its LOG_FILE, a JSON log, the
database, Redis (looked at while the crawl runs), the stats or the metrics.
Some ids answer 503 once, one drops its connection once, one answers 500
every time: the Retrying and give-up lines exist, and hold no key either.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import threading
import time
import urllib.request
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import pytest
import redis

from tests.support.crawls import ROOT, crawl_command, crawl_env, run_scrapy
from tests.support.imitations import bestbuy, magento, shopify
from tests.support.imitations.served import ImitationsProcess
from tests.support.recipes import APIS, COLUMNS, GONE_FROM_LIST, SHOPIFY_VARIANTS, Api, money, recipe
from tests.support.services import REDIS_URL, mysql_query

if TYPE_CHECKING:
    from collections.abc import Iterator

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
class Imitations(ImitationsProcess):
    """Every imitation in its subprocess, and the recipes pointed at them."""

    def settings(self, api: Api) -> dict[str, str]:
        """The recipe, pointed at the imitation, with its real key."""
        settings = recipe(api.recipe or api.name)
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(settings["PRODUCT_URL"]))
        settings["PRODUCT_URL"] = settings["PRODUCT_URL"].replace(origin, self.url(api.name))
        if api.key is not None:
            settings["API_KEY"] = api.key
        return settings


@pytest.fixture(scope="session")
def imitations() -> Iterator[Imitations]:
    with Imitations() as process:
        yield process


def redis_values(client: redis.Redis, prefix: str) -> bytes:
    found = []
    for key in client.scan_iter(f"*{prefix}*", count=1000):
        found.append(key)
        kind = client.type(key)
        if kind == b"string":
            found.append(client.get(key) or b"")
        elif kind == b"list":
            found += client.lrange(key, 0, -1)
        elif kind == b"hash":
            found += [part for pair in client.hgetall(key).items() for part in pair]
        elif kind in (b"set",):
            found += list(client.smembers(key))
        elif kind == b"zset":
            found += client.zrange(key, 0, -1)
    return b"\n".join(found)


def all_forms(secrets: list[str]) -> list[str]:
    return sorted({form for secret in secrets for form in (secret, quote(secret, safe=""), secret[:12])})


def crawl(api: Api, settings: dict[str, str], redis_prefix: str | None, log_file: Any) -> tuple[int, str, str]:
    """Run the crawl; while it runs, read Redis and the metrics. (exit code, output, what Redis and metrics held)."""
    ids = () if "PRODUCT_IDS" in settings else ("-a", f"start_id={api.ids[0]}", "-a", f"end_id={api.ids[1]}")
    process = subprocess.Popen(
        crawl_command(*ids, settings=settings),
        cwd=ROOT, env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
    reader.start()
    client = redis.Redis.from_url(REDIS_URL)
    seen = b""
    try:
        deadline = time.monotonic() + 240
        while process.poll() is None and time.monotonic() < deadline:
            if redis_prefix is not None:
                seen += redis_values(client, redis_prefix)
            logged = "".join(lines) + (log_file.read_text() if log_file.exists() else "")
            for found in re.finditer(r"Prometheus metrics at (http://[0-9.:]+/metrics)", logged):
                if found:
                    try:
                        with _OPENER.open(found[1], timeout=5) as answer:
                            seen += answer.read()
                    except OSError:
                        pass
            time.sleep(0.2)
    finally:
        client.close()
        if process.poll() is None:
            process.kill()
    code = process.wait(timeout=30)
    reader.join(timeout=10)
    return code, "".join(lines), seen.decode(errors="replace")


def asked_ids(template: str, arrivals: list[dict[str, Any]]) -> set[str]:
    """The ids the arrivals asked for, decoded from their paths by the recipe's PRODUCT_URL."""
    before, after = urlsplit(template).path.split("{id}")
    return {unquote(a["path"][len(before):len(a["path"]) - len(after)]) for a in arrivals
            if a["path"].startswith(before) and a["path"].endswith(after)}


def database_dump(url: str) -> str:
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            return "\n".join(connection.iterdump())
    tables = [name for (name,) in mysql_query(url, "SHOW TABLES")]
    return "\n".join(repr(mysql_query(url, f"SELECT * FROM {name}")) for name in tables)


def stored(url: str) -> dict[Any, tuple[Any, ...]]:
    sql = f"SELECT {COLUMNS} FROM products"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            rows = connection.execute(sql).fetchall()
        return {row[0]: (*row[:2], money(row[2]), *row[3:6], money(row[6]), row[7]) for row in rows}
    return {row[0]: row for row in mysql_query(url, sql)}


def failures(url: str) -> dict[Any, str]:
    sql = "SELECT product_id, outcome FROM crawl_failures"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            return dict(connection.execute(sql).fetchall())
    return dict(mysql_query(url, sql))


def check_recipe(imitations: Imitations, api: Api, database: str, tmp_path: Any, *, redis_prefix: str | None,
                 json_log: bool) -> None:
    imitations.reset()
    present = sorted(key for key in api.catalogue if api.ids[0] <= key <= api.ids[1])
    once, dropped, broken = [present[3], present[5]], present[7], present[9]
    imitations.faults(api.name, {**{str(key): "once" for key in once}, str(dropped): "drop", str(broken): "always"})
    log_file = tmp_path / "crawl.log"
    settings = {**imitations.settings(api), "DATABASE_URL": database, "LOG_LEVEL": "DEBUG",
                "LOG_FILE": str(log_file), "MAX_RETRIES": 2, "RETRY_BACKOFF_BASE": 0.1, "RETRY_BACKOFF_MAX": 0.2,
                "METRICS_PORT": 0, "METRICS_LINGER": 1, "PROGRESS_INTERVAL": 0.5}
    if redis_prefix is not None:
        settings.update(REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=redis_prefix)
    asked = range(api.ids[0], api.ids[1] + 1)
    if "PRODUCT_IDS" in settings:
        # The recipe crawls a list of the API's ids: the products of the range, and a few the API no
        # longer has. No id between them is asked.
        gone = [key for key in asked if key not in api.catalogue][:GONE_FROM_LIST]
        asked = sorted([*present, *gone])
        (tmp_path / "ids.txt").write_text("".join(f"{key}\n" for key in asked))
        settings["PRODUCT_IDS"] = f"@{tmp_path / 'ids.txt'}"
    if json_log:
        settings["LOG_FORMAT"] = "json"
    code, output, seen = crawl(api, settings, redis_prefix, log_file)
    log = log_file.read_text()
    assert code == 0, (output + log)[-3000:]

    # Rows column by column: every product of the range, the documented example exactly.
    rows = stored(database)
    expected = {key: api.row(api.catalogue[key]) for key in present if key != broken}
    assert rows == expected
    assert rows[api.example[0]] == api.example
    # The ids between products are missing whatever the 404 said; the broken one failed.
    outcomes = failures(database)
    assert outcomes == {**{key: "missing" for key in asked if key not in api.catalogue}, broken: "failed"}

    arrivals = imitations.arrivals(api.name)
    # Each id was asked, and nothing else (the API's own log, retries included).
    assert asked_ids(settings["PRODUCT_URL"], arrivals) == {str(key) for key in asked}
    statuses = [arrival["status"] for arrival in arrivals if "status" in arrival]
    assert 401 not in statuses and 403 not in statuses
    assert statuses.count(503) >= 2  # the faults did happen: retries were logged
    assert "Retrying" in log or '"Retrying' in log or "retry" in log.lower()
    assert seen, "neither Redis nor the metrics endpoint was read while the crawl ran"
    for form in all_forms(api.secrets):
        for where, text in (("output", output), ("LOG_FILE", log), ("database", database_dump(database)),
                            ("Redis and metrics", seen)):
            assert form not in text, f"{form!r} found in the {where}"


@pytest.mark.parametrize("name", ["woocommerce", "bigcommerce", "bestbuy", "dummyjson",
                                  "shopify"])
def test_a_recipe_crawls_its_api_and_the_key_is_nowhere(imitations, name, mysql_url, redis_prefix, tmp_path):
    check_recipe(imitations, APIS[name], mysql_url, tmp_path, redis_prefix=redis_prefix, json_log=False)


@pytest.mark.parametrize("name", ["woocommerce", "bigcommerce", "bestbuy"])
def test_with_json_logs_and_sqlite_the_key_is_nowhere_either(imitations, name, tmp_path):
    check_recipe(imitations, APIS[name], f"sqlite:///{tmp_path}/products.db", tmp_path, redis_prefix=None,
                 json_log=True)


def test_shopify_variants_are_rows_of_their_own(imitations, mysql_url, tmp_path):
    check_recipe(imitations, SHOPIFY_VARIANTS, mysql_url, tmp_path, redis_prefix=None, json_log=False)
    stored_variants = mysql_query(mysql_url, "SELECT product_id, variant_id, sku, price, stock, compare_at, "
                                             "removed_at FROM product_variants ORDER BY product_id, variant_id")
    low, high = SHOPIFY_VARIANTS.ids
    present = sorted(key for key in shopify.catalogue() if low <= key <= high)
    broken = present[9]  # check_recipe's: it always fails, so it has no row
    expected = sorted((key, str(v["id"]), v.get("sku"), money(v["price"]), v["inventory_quantity"],
                       money(v.get("compare_at_price")), None)
                      for key in present if key != broken for v in shopify.catalogue()[key]["variants"])
    assert sorted(stored_variants) == expected
    assert len({row[0] for row in stored_variants if len([r for r in stored_variants if r[0] == row[0]]) > 1}) > 10
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products WHERE status = 'active'") == [(len(present) - 2,)]


def test_magento_skus_with_spaces_and_slashes(imitations, mysql_url, tmp_path):
    imitations.reset()
    skus = ["WS12 M/Blue", *sorted(magento.catalogue())[:20], "NO SUCH/SKU"]
    ids = tmp_path / "skus.txt"
    ids.write_text("\n".join(skus) + "\n")
    settings = {**imitations.settings(Api("magento", magento.TOKEN, [], (0, 0), tuple, ())),
                "DATABASE_URL": mysql_url, "PRODUCT_IDS": f"@{ids}"}
    process = subprocess.run(crawl_command(settings=settings), cwd=ROOT, env=crawl_env(), capture_output=True,
                             text=True, timeout=120, check=False)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "/rest/default/V1/products/WS12%20M%2FBlue" in [a["path"] for a in imitations.arrivals("magento")]
    assert mysql_query(mysql_url, f"SELECT {COLUMNS} FROM products WHERE product_id = %s",
                       ("WS12 M/Blue",)) == [("WS12 M/Blue", "Radiant Tee", Decimal("22.00"), 100, None, None, None,
                                              None)]
    assert failures(mysql_url) == {"NO SUCH/SKU": "missing"}
    assert magento.TOKEN not in process.stdout + process.stderr


def test_fetch_and_shell_with_a_query_key_show_no_key(imitations):
    """``scrapy fetch`` and ``scrapy shell`` print the URL they fetch: the key goes in after them."""
    imitations.reset()
    api = APIS["bestbuy"]
    settings = imitations.settings(api)
    env = crawl_env(**settings, LOG_LEVEL="DEBUG")
    url = settings["PRODUCT_URL"].replace("{id}", str(bestbuy.FIRST_SKU))
    fetched = run_scrapy("fetch", "--headers", url, env=env)
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    shell = run_scrapy("shell", url, "-c", "(response.url, response.request.url, response.status, "
                       "dict(response.request.headers))", env=env)
    assert shell.returncode == 0, shell.stderr[-3000:]
    assert "200" in shell.stdout and url.split("?")[0] in shell.stdout
    arrivals = imitations.arrivals("bestbuy")
    assert [a["status"] for a in arrivals] == [200, 200]
    assert all(f"apiKey={bestbuy.API_KEY}" in a["query"] for a in arrivals)
    for text in (fetched.stdout, fetched.stderr, shell.stdout, shell.stderr):
        assert bestbuy.API_KEY not in text


@pytest.mark.parametrize(("name", "key", "shown"), [
    ("magento", "WS12 M/Blue", "'product_id': 'WS12 M/Blue',"),
    ("shopify", str(shopify.FIRST_ID), f"'product_id': {shopify.FIRST_ID},"),
])
def test_parse_gives_the_id_its_type(imitations, name, key, shown, tmp_path):
    """``scrapy parse`` of a product URL: the id read back from the URL is PRODUCT_ID_TYPE's (a SKU, decoded)."""
    imitations.reset()
    api = APIS.get(name) or Api(name, magento.TOKEN, [], (0, 0), tuple, ())
    settings = {name: value for name, value in imitations.settings(api).items() if name != "PRODUCT_IDS"}
    url = settings["PRODUCT_URL"].replace("{id}", quote(key, safe=""))
    result = run_scrapy("parse", "--nolog", "--spider", "products", url,
                        env=crawl_env(**settings, DATABASE_URL=f"sqlite:///{tmp_path}/parse.db"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert shown in result.stdout, result.stdout[-3000:]
    assert "id_mismatch" not in result.stdout + result.stderr
