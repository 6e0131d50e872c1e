"""What a Scrapy user does, through the real commands: retry settings, fetch, shell, JOBDIR, feeds.

Each test is a row of issue 13's table; judged by the simulator's arrival log,
the rows in the database, exit codes and what the command prints.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from decimal import Decimal
from operator import attrgetter

import pytest
from scrapy.addons import AddonManager
from scrapy.settings import SETTINGS_PRIORITIES, Settings

from productcrawler.config import DEFAULTS, ConfigError, CrawlConfig
from simulator import catalog
from tests.support.crawls import crawl_env, run_crawl, run_scrapy
from tests.support.logs import dumped_stat
from tests.support.services import REDIS_URL, mysql_query

#: Nothing listens on these (they are in this test module's port range).
NO_DATABASE = "mysql://root@127.0.0.1:22999/nothing_here"
NO_REDIS = "redis://127.0.0.1:22998/0"


def arrivals_per_id(simulator) -> Counter[int]:
    return Counter(product_id for _at, product_id, _status, _fault in simulator.arrivals())


def crawl(simulator, mysql_url, end: int, faults: list[str], *args: str, **settings: object):
    simulator.set_faults(faults)
    return run_crawl("-a", f"end_id={end}", *args, settings={
        "API_BASE_URL": simulator.base_url, "DATABASE_URL": mysql_url, "RETRY_BACKOFF_BASE": 0.05,
        **settings})


def failures(mysql_url: str) -> list[tuple]:
    return mysql_query(mysql_url, "SELECT product_id, outcome, http_status, reason, attempts "
                                  "FROM crawl_failures ORDER BY product_id")


# -- retry settings --------------------------------------------------------------


def test_retry_times_zero_requests_each_always_503_id_once(clean_simulator, mysql_url):
    result = crawl(clean_simulator, mysql_url, 40, ["503=21-40@*"], RETRY_TIMES=0)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = arrivals_per_id(clean_simulator)
    assert {i: seen[i] for i in range(21, 41)} == dict.fromkeys(range(21, 41), 1)
    assert [f for f in failures(mysql_url) if f[1] == "failed"] == [
        (i, "failed", 503, "http_503", 1) for i in range(21, 41)]
    assert "Gave up retrying" not in result.stderr  # the project's give-up level is DEBUG


def test_empty_retry_http_codes_retries_no_status(clean_simulator, mysql_url):
    result = crawl(clean_simulator, mysql_url, 30, ["503=21-25@1", "500=26-27@1"],
                   RETRY_HTTP_CODES="[]")
    assert result.returncode == 0, result.stderr[-3000:]
    seen = arrivals_per_id(clean_simulator)
    assert {i: seen[i] for i in range(21, 28)} == dict.fromkeys(range(21, 28), 1)
    assert [f[:4] for f in failures(mysql_url) if f[1] == "failed"] == (
        [(i, "failed", 503, "http_503") for i in range(21, 26)]
        + [(i, "failed", 500, "http_500") for i in range(26, 28)])


def test_retry_http_codes_chooses_the_statuses_retried(clean_simulator, mysql_url):
    result = crawl(clean_simulator, mysql_url, 30, ["503=21-22@1", "500=23-24@1"], RETRY_HTTP_CODES="503")
    assert result.returncode == 0, result.stderr[-3000:]
    seen = arrivals_per_id(clean_simulator)
    assert [seen[i] for i in range(21, 25)] == [2, 2, 1, 1]
    assert [f[0] for f in failures(mysql_url) if f[1] == "failed"] == [23, 24]


def test_give_up_log_level_applies(clean_simulator, mysql_url):
    result = crawl(clean_simulator, mysql_url, 30, ["503=21-25@*"], RETRY_TIMES=1,
                   RETRY_GIVE_UP_LOG_LEVEL="WARNING")
    assert result.returncode == 0, result.stderr[-3000:]
    gave_up = [line for line in result.stderr.splitlines() if "Gave up retrying" in line]
    assert len(gave_up) == 5
    assert all("WARNING" in line and "http_503" in line for line in gave_up)


def test_retry_enabled_false_turns_off_retries_and_nothing_else(clean_simulator, mysql_url):
    end = 80
    result = crawl(clean_simulator, mysql_url, end, ["503=21-25@1"], RETRY_ENABLED=False)
    assert result.returncode == 0, result.stderr[-3000:]
    missing = [i for i in range(1, end + 1) if catalog.is_missing(i) and not 21 <= i <= 25]
    assert missing, "the range must hold some 404s"
    assert failures(mysql_url) == sorted(
        [(i, "missing", 404, "not_found", 1) for i in missing]
        + [(i, "failed", 503, "http_503", 1) for i in range(21, 26)])
    assert set(arrivals_per_id(clean_simulator).values()) == {1}


@pytest.mark.parametrize(("settings", "line"), [
    ({"RETRY_TIMES": 0, "MAX_RETRIES": 3}, "RETRY_TIMES='0' and MAX_RETRIES='3' disagree"),
    ({"RETRY_HTTP_CODES": "often"}, "RETRY_HTTP_CODES='often' is not a list of HTTP statuses"),
    ({"RETRY_GIVE_UP_LOG_LEVEL": "LOUD"}, "RETRY_GIVE_UP_LOG_LEVEL='LOUD' is not a log level"),
    ({"RETRY_ENABLED": "perhaps"}, "RETRY_ENABLED='perhaps' is not true or false"),
])
def test_a_bad_retry_setting_is_refused_in_one_line(clean_simulator, mysql_url, settings, line):
    result = run_crawl("-a", "end_id=10", settings={"API_BASE_URL": clean_simulator.base_url,
                                                    "DATABASE_URL": mysql_url, **settings})
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"productcrawler: configuration error: {line}" in result.stderr
    assert "Traceback" not in result.stderr
    assert clean_simulator.arrivals() == []


@pytest.mark.parametrize("shared", [False, True], ids=["local", "redis"])
def test_delayed_retries_are_counted_once(clean_simulator, mysql_url, redis_prefix, shared):
    settings = {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix} if shared else {}
    result = crawl(clean_simulator, mysql_url, 30, ["503=21-25@2"], **settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert dumped_stat(result.stderr, "retry/count") == 10
    assert dumped_stat(result.stderr, "productcrawler/retry/delayed") == 10


# -- scrapy fetch and scrapy shell -------------------------------------------------


def standalone_env(simulator) -> dict[str, str]:
    """The project's settings with a database and a Redis that cannot be reached."""
    return crawl_env(API_BASE_URL=simulator.base_url, DATABASE_URL=NO_DATABASE, REDIS_URL=NO_REDIS)


def test_fetch_prints_a_product_and_a_404_without_database_or_redis(clean_simulator):
    missing = next(i for i in range(1, 1000) if catalog.is_missing(i))
    env = standalone_env(clean_simulator)
    product = run_scrapy("fetch", "--nolog", f"{clean_simulator.base_url}/product/1", env=env)
    assert product.returncode == 0, product.stderr[-3000:]
    assert json.loads(product.stdout)["id"] == 1
    absent = run_scrapy("fetch", f"{clean_simulator.base_url}/product/{missing}", env=env)
    assert absent.returncode == 0, absent.stderr[-3000:]
    assert "not found" in absent.stdout
    assert "KeyError" not in absent.stderr and "Traceback" not in absent.stderr
    assert sorted(arrivals_per_id(clean_simulator)) == [1, missing]


def test_fetch_retries_like_a_crawl_then_prints_the_last_answer(clean_simulator):
    clean_simulator.set_faults(["503=5@*"])
    result = run_scrapy("fetch", "-s", "RETRY_TIMES=2", "-s", "RETRY_BACKOFF_BASE=0.05",
                        f"{clean_simulator.base_url}/product/5", env=standalone_env(clean_simulator))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "service unavailable" in result.stdout
    assert "Traceback" not in result.stderr
    assert arrivals_per_id(clean_simulator) == {5: 3}


def test_shell_fetches_with_the_aiohttp_handler_without_database_or_redis(clean_simulator):
    code = ("(response.status, response.json()['id'], "
            "[c.__name__ for c in type(crawler.engine.downloader.handlers._get_handler('http')).__mro__])")
    result = run_scrapy("shell", "--nolog", "-c", code, f"{clean_simulator.base_url}/product/1",
                        env=standalone_env(clean_simulator))
    assert result.returncode == 0, result.stderr[-3000:]
    status, product_id, handler_classes = ast.literal_eval(result.stdout.strip())
    assert (status, product_id) == (200, 1)
    # The project's paced handler (the rate limit at the wire), built on Scrapy's aiohttp one.
    assert {"PacedAiohttpDownloadHandler", "AiohttpDownloadHandler"} <= set(handler_classes)


# -- JOBDIR and feeds --------------------------------------------------------------


def test_jobdir_is_refused_in_one_line(clean_simulator, mysql_url, tmp_path):
    result = run_crawl("-a", "end_id=50", settings={"API_BASE_URL": clean_simulator.base_url,
                                                    "DATABASE_URL": mysql_url, "JOBDIR": str(tmp_path / "job")})
    assert result.returncode == 2, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "JOBDIR" in line]
    assert lines == [f"productcrawler: configuration error: JOBDIR='{tmp_path / 'job'}' is not supported: "
                     "the crawl resumes its own pass (in the database, or in Redis with REDIS_URL); "
                     "run again without JOBDIR"]
    assert clean_simulator.arrivals() == []
    assert not (tmp_path / "job").exists()


def test_feed_exports_the_stored_products_only(clean_simulator, mysql_url, tmp_path):
    feed = tmp_path / "products.jsonl"
    result = crawl(clean_simulator, mysql_url, 60, ["503=21-22@*"], "-O", str(feed), RETRY_TIMES=0)
    assert result.returncode == 0, result.stderr[-3000:]
    exported = [json.loads(line) for line in feed.read_text().splitlines()]
    rows = mysql_query(mysql_url, "SELECT product_id, name, price, stock, category, brand, rating, "
                                  "sales_count FROM products ORDER BY product_id")
    assert failures(mysql_url), "the range must hold ids that are not products"
    assert sorted(e["product_id"] for e in exported) == [r[0] for r in rows]
    by_id = {e["product_id"]: e for e in exported}
    for product_id, name, price, stock, category, brand, rating, sales in rows:
        item = by_id[product_id]
        # The article's columns, and what PRODUCT_COLUMNS, KEEP_ANSWER and VARIANTS add (empty here).
        assert set(item) == {"product_id", "name", "price", "stock", "category", "brand", "rating",
                             "sales_count", "update_time", "extra", "answer", "answer_digest", "variants"}
        assert (item["extra"], item["answer"], item["answer_digest"], item["variants"]) == ({}, None, None, None)
        assert (item["name"], item["stock"], item["category"], item["brand"], item["sales_count"]) == (
            name, stock, category, brand, sales)
        assert [None if item[k] is None else Decimal(item[k]) for k in ("price", "rating")] == [price, rating]


# -- another spider of the project -------------------------------------------------

OTHER_SPIDER = '''
import scrapy


class OtherSpider(scrapy.Spider):
    name = "other"

    async def start(self):
        yield scrapy.Request(self.base + "/product/1")
        yield scrapy.Request(self.base + "/product/10")

    def parse(self, response):
        yield {"url": response.url, "status": response.status}
'''


def test_another_spider_goes_through_our_components_untouched(clean_simulator, mysql_url, redis_prefix,
                                                              tmp_path):
    clean_simulator.set_faults(["503=10@*"])
    (tmp_path / "other.py").write_text(OTHER_SPIDER)
    env = crawl_env(API_BASE_URL=clean_simulator.base_url, DATABASE_URL=mysql_url, REDIS_URL=REDIS_URL,
                    REDIS_KEY_PREFIX=redis_prefix)
    result = run_scrapy("runspider", str(tmp_path / "other.py"), "-a", f"base={clean_simulator.base_url}",
                        "-s", "RETRY_TIMES=2", "-s", "RETRY_BACKOFF_BASE=0.05", "-O", str(tmp_path / "out.jsonl"),
                        env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()] == [
        {"url": f"{clean_simulator.base_url}/product/1", "status": 200}]
    assert arrivals_per_id(clean_simulator) == {1: 1, 10: 3}  # retried by the same rules
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products")[0][0] == 0


# -- DOWNLOAD_TIMEOUT is API_TIMEOUT -------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    ({"API_TIMEOUT": ("30", "project")}, 30.0),  # Scrapy's default DOWNLOAD_TIMEOUT=180 does not count
    ({"API_TIMEOUT": ("30", "project"), "DOWNLOAD_TIMEOUT": ("2", "cmdline")}, 2.0),
    ({"API_TIMEOUT": ("5", "cmdline"), "DOWNLOAD_TIMEOUT": ("60", "project")}, 5.0),
])
def test_download_timeout_given_at_the_higher_priority_wins(given, expected):
    settings = Settings()
    for name, (value, priority) in given.items():
        settings.set(name, value, priority=priority)
    assert CrawlConfig.from_settings(settings).api.timeout == expected


def test_download_timeout_and_api_timeout_disagreeing_at_one_priority_are_refused():
    settings = Settings({"API_TIMEOUT": "30", "DOWNLOAD_TIMEOUT": "5"}, priority="cmdline")
    with pytest.raises(ConfigError, match="^DOWNLOAD_TIMEOUT='5' and API_TIMEOUT='30' disagree"):
        CrawlConfig.from_settings(settings)


def test_parse_shows_the_cleaned_product_without_database_or_redis(clean_simulator):
    result = run_scrapy("parse", "--nolog", "--spider", "products", f"{clean_simulator.base_url}/product/1",
                        env=standalone_env(clean_simulator))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'product_id': 1," in result.stdout and "'price': Decimal(" in result.stdout
    assert "KeyError" not in result.stderr and "Traceback" not in result.stderr


# -- RETRY_TIMES / DOWNLOAD_TIMEOUT in settings.py (project priority) -----------------


def project_settings(cmdline=None, **scrapy_settings):
    """The project's settings as a crawler process has them, plus Scrapy settings a user pasted into settings.py.

    ``cmdline``: what ``-s`` gives. The add-on fills in the contract (its
    defaults, or the environment's values) as the crawler process starts.
    """
    settings = Settings()
    settings.setmodule("productcrawler.settings", priority="project")
    settings.setdict(scrapy_settings, priority="project")
    settings.setdict(cmdline or {}, priority="cmdline")
    AddonManager.load_pre_crawler_settings(settings)
    return settings


@pytest.mark.parametrize(("pasted", "field", "expected"), [
    ({"RETRY_TIMES": 5}, "retry.max_retries", 5),
    ({"DOWNLOAD_TIMEOUT": 20}, "api.timeout", 20.0),
])
def test_a_scrapy_setting_in_settings_py_is_honoured_when_ours_is_only_the_default(
        monkeypatch, pasted, field, expected):
    monkeypatch.delenv("MAX_RETRIES", raising=False)
    monkeypatch.delenv("API_TIMEOUT", raising=False)
    assert attrgetter(field)(CrawlConfig.from_settings(project_settings(**pasted))) == expected


def test_retry_times_in_settings_py_and_max_retries_in_the_environment_are_refused(monkeypatch):
    monkeypatch.setenv("MAX_RETRIES", "3")
    with pytest.raises(ConfigError, match="^RETRY_TIMES=5 and MAX_RETRIES='3' disagree"):
        CrawlConfig.from_settings(project_settings(RETRY_TIMES=5))


def test_retry_times_and_a_max_retries_written_into_settings_py_are_refused(monkeypatch):
    monkeypatch.delenv("MAX_RETRIES", raising=False)
    with pytest.raises(ConfigError, match="^RETRY_TIMES=5 and MAX_RETRIES=4 disagree"):
        CrawlConfig.from_settings(project_settings(RETRY_TIMES=5, MAX_RETRIES=4))


def test_retry_times_and_a_max_retries_equal_to_the_default_both_in_settings_py_are_refused(monkeypatch):
    # Written there by a user, MAX_RETRIES=3 is given, not the default: neither silently wins.
    monkeypatch.delenv("MAX_RETRIES", raising=False)
    with pytest.raises(ConfigError, match="^RETRY_TIMES=5 and MAX_RETRIES=3 disagree"):
        CrawlConfig.from_settings(project_settings(RETRY_TIMES=5, MAX_RETRIES=3))


def test_the_contract_comes_from_the_environment_then_the_default_and_s_wins(monkeypatch):
    monkeypatch.setenv("MAX_REQUESTS_PER_SECOND", "40")
    monkeypatch.setenv("API_TIMEOUT", "7")
    monkeypatch.setenv("PRODUCT_ID_END", " ")  # blank: unset
    settings = project_settings(cmdline={"API_TIMEOUT": "9"})
    config = CrawlConfig.from_settings(settings)
    assert (config.rate.max_requests_per_second, config.api.timeout, config.ids.end_id) == (40.0, 9.0, 50_000)
    assert settings.getpriority("MAX_REQUESTS_PER_SECOND") == SETTINGS_PRIORITIES["addon"]
    assert settings.getpriority("PRODUCT_ID_END") == SETTINGS_PRIORITIES["default"]


def test_settings_py_holds_no_name_of_the_contract():
    import productcrawler.settings as module

    assert not set(DEFAULTS) & set(vars(module))


def test_scrapy_settings_shows_the_contract_as_a_crawl_has_it():
    result = run_scrapy("settings", "--get", "MAX_RETRIES", env=crawl_env(MAX_RETRIES="7"))
    assert (result.returncode, result.stdout.strip()) == (0, "7"), result.stderr[-2000:]


@pytest.mark.parametrize(("args", "shown"), [
    ((), "True"),  # the declared default, not None
    (("-s", "GUARD_ENABLED=false"), "false"),
])
def test_scrapy_settings_shows_a_switch_the_environment_does_not_give(args, shown):
    result = run_scrapy("settings", *args, "--get", "GUARD_ENABLED", env=crawl_env(GUARD_ENABLED="false"))
    assert (result.returncode, result.stdout.strip()) == (0, shown), result.stderr[-2000:]


# -- the API key goes to the API only ---------------------------------------------------


@pytest.mark.parametrize(("url", "sent"), [
    ("https://api.example.test/v1/product/7", True),
    ("https://api.example.test/v1/", True),
    ("https://example.org/", False),  # scrapy shell / fetch on another site, another spider of the project
    ("https://api.example.test.evil.org/v1/product/7", False),
    ("https://api.example.test/v10/product/7", False),
])
@pytest.mark.parametrize("base", ["https://api.example.test/v1", "https://API.Example.test/v1/"])
def test_the_api_key_is_sent_to_api_base_url_only(url, sent, base):
    from scrapy import Request

    auth = CrawlConfig.from_settings({"API_KEY": "k-123", "API_BASE_URL": base}).api.auth
    assert auth is not None and auth.headers == (("Authorization", "Bearer k-123"),)
    assert auth.sends_to(Request(url).url) is sent


def test_fetch_beside_a_running_crawl_does_not_take_its_metrics_port(clean_simulator):
    """``docker compose exec crawler scrapy fetch ...``: METRICS_PORT is the running crawl's."""
    import socket

    with socket.socket() as crawl_endpoint:
        crawl_endpoint.bind(("127.0.0.1", 0))
        crawl_endpoint.listen()
        port = crawl_endpoint.getsockname()[1]
        env = {**standalone_env(clean_simulator), "METRICS_PORT": str(port)}
        result = run_scrapy("fetch", "--nolog", f"{clean_simulator.base_url}/product/1", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["id"] == 1


SECRET = "s3cr3t-0f-th1s-t3st"


@pytest.mark.parametrize(("name", "value", "shown"), [
    ("API_KEY", SECRET, "***"),
    ("DATABASE_URL", f"mysql://crawler:{SECRET}@db.internal:3306/shop", "mysql://crawler:***@db.internal:3306/shop"),
    ("DATABASE_URL", f"mysql://c@db.internal/shop?ssl_key_password={SECRET}",
     "mysql://c@db.internal/shop?ssl_key_password=***"),
    ("REDIS_URL", f"rediss://default:{SECRET}@redis.internal:6380/0", "rediss://default:***@redis.internal:6380/0"),
    ("PUSHGATEWAY_URL", f"https://push:{SECRET}@push.internal", "https://push:***@push.internal"),
    ("API_BASE_URL", f"https://u:{SECRET}@api.internal/v1", "https://u:***@api.internal/v1"),
    ("PRODUCT_URL", f"https://u:{SECRET}@api.internal/p/{{id}}", "https://u:***@api.internal/p/{id}"),
    ("PRODUCT_LIST_URL", f"https://u:{SECRET}@api.internal/products.json", "https://u:***@api.internal/products.json"),
    ("PROXY_URLS", f"http://p:{SECRET}@proxy1:3128,http://proxy2:3128", "http://p:***@proxy1:3128,http://proxy2:3128"),
    ("API_HEADERS", f'{{"X-Tenant": "{SECRET}"}}', '{"X-Tenant": "***"}'),
    ("API_HEADERS", f'not json {SECRET}', "***"),
])
@pytest.mark.parametrize("given", ["environment", "-s"])
def test_scrapy_settings_masks_every_secret(name, value, shown, given):
    if given == "environment":
        result = run_scrapy("settings", "--get", name, env=crawl_env(**{name: value}))
    else:
        result = run_scrapy("settings", "-s", f"{name}={value}", "--get", name)
    assert (result.returncode, result.stdout.strip()) == (0, shown), result.stderr[-2000:]
    assert SECRET not in result.stdout + result.stderr


def test_scrapy_settings_shows_an_unset_secret_as_unset():
    result = run_scrapy("settings", "--get", "API_KEY", env=crawl_env())
    assert (result.returncode, result.stdout.strip()) == (0, "None"), result.stderr[-2000:]
