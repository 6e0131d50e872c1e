"""Real crawls through proxy.py (tests/support/independent_proxy.py), an HTTP proxy we did not write.

tests/test_proxy_crawl.py checks the pool against simulator/proxies.py, which
we wrote with the client and which agrees with it by construction. Here the
proxy is someone else's: the crawl must store every id through it, stop as
docs/proxies.md says when it answers 407 (to a request, or to the
CONNECT of an https API), lose no id when it is SIGKILLed mid-crawl, and stop
with nothing recorded when every proxy is killed, or cannot reach the API.
Who carried each request is read from proxy.py's own record of what it
forwarded and from the simulator's arrivals, never from the crawl's stats
alone.
"""

from __future__ import annotations

import re
import socket
import time
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from productcrawler.config.proxy_urls import parse_proxy_urls
from tests.support.catalogue import assert_pass_complete
from tests.support.crawls import LoggedCrawl, crawl_command, run_crawl, verifying
from tests.support.independent_proxy import ProxyPy
from tests.support.logs import dumped_stats, log_lines
from tests.support.services import mysql_query, stored_count

if TYPE_CHECKING:
    from collections.abc import Iterator

    from simulator.process import SimulatorProcess

USER, PASSWORD = "crawler", "pp-s3cret"
CAP = 100
_PRODUCT_PATH = re.compile(r"/v1/product/(\d+)$")


@pytest.fixture(scope="module")
def proxy_py(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyPy]:
    """One proxy.py for the module."""
    proxy = ProxyPy(tmp_path_factory.mktemp("proxy-py"), user=USER, password=PASSWORD).start()
    try:
        yield proxy
    finally:
        proxy.kill()


@pytest.fixture
def doomed_proxy_py(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyPy]:
    """A second proxy.py, for a test that kills it."""
    proxy = ProxyPy(tmp_path_factory.mktemp("proxy-py-doomed"), user=USER, password=PASSWORD).start()
    try:
        yield proxy
    finally:
        proxy.kill()


def settings_for(simulator: SimulatorProcess, mysql_url: str, *proxy_urls: str) -> dict[str, object]:
    return {"API_BASE_URL": simulator.base_url, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": CAP,
            "PROXY_URLS": ",".join(proxy_urls)}


def product_ids(paths: list[str]) -> list[int]:
    """The product ids of request paths, in order (each path must be a product's)."""
    ids = []
    for path in paths:
        match = _PRODUCT_PATH.search(path)
        assert match is not None, path
        ids.append(int(match.group(1)))
    return ids


def label(url: str) -> str:
    return parse_proxy_urls(url)[0].label


def test_a_crawl_through_proxy_py_stores_every_id_and_proxy_py_carried_each_request(
        clean_simulator, mysql_url, proxy_py):
    end = 200
    before = len(proxy_py.forwarded())
    result = run_crawl("-a", f"end_id={end}", settings=settings_for(clean_simulator, mysql_url, proxy_py.url()),
                       timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_pass_complete(mysql_url, end)
    assert PASSWORD not in result.stderr + result.stdout
    # Each request the API saw, proxy.py forwarded: the same ids, as many times.
    arrived = sorted(a[1] for a in clean_simulator.arrivals())
    assert arrived == list(range(1, end + 1))
    assert sorted(product_ids(proxy_py.forwarded()[before:])) == arrived


def test_proxy_py_answering_407_stops_the_crawl_with_exit_3_and_records_nothing(
        clean_simulator, mysql_url, proxy_py):
    # A wrong password with a single proxy: docs/proxies.md and the exit codes (docs/troubleshooting.md) promise
    # exit 3 within seconds, one ERROR line saying what to check, nothing recorded.
    before = len(proxy_py.forwarded())
    started = time.monotonic()
    result = run_crawl("-a", "end_id=200", timeout=30,
                       settings=settings_for(clean_simulator, mysql_url, proxy_py.url(password="wrong-pass")))
    assert result.returncode == 3, result.stderr[-3000:]
    assert time.monotonic() - started < 20
    errors = log_lines(result.stderr, "ERROR")
    assert len(errors) == 1 and "check the credentials in PROXY_URLS" in errors[0], errors
    assert f"http://{USER}:***@127.0.0.1:{proxy_py.port}" in errors[0]
    assert "wrong-pass" not in result.stderr + result.stdout
    assert "Finished (guard_proxy_auth_failures)" in result.stderr
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products") == [(0,)]
    # It was proxy.py that refused them (its 407 ends at the connection's close,
    # no Content-Length), and nothing got through to the API.
    stats = dumped_stats(result.stderr, "productcrawler/proxy/")
    assert stats["productcrawler/proxy/failure_reason/http_407"] >= 1
    assert "ProxyAuthenticationFailed" in proxy_py.log_text()
    assert proxy_py.forwarded()[before:] == []
    assert clean_simulator.arrivals() == []


def test_proxy_py_killed_mid_crawl_costs_no_id_the_other_proxy_carries_the_rest(
        clean_simulator, mysql_url, proxy_py, doomed_proxy_py):
    end = CAP * 4  # killed about 1 s in: some 3 s left, over twice the CAP asserted below after the kill
    before = len(proxy_py.forwarded())
    crawl = LoggedCrawl(crawl_command("-a", f"end_id={end}", settings=settings_for(
        clean_simulator, mysql_url, doomed_proxy_py.url(), proxy_py.url())))
    try:
        give_up = time.monotonic() + 30
        while len(doomed_proxy_py.forwarded()) < CAP // 2:
            assert crawl.process.poll() is None, "the crawl ended before the proxy could be killed"
            assert time.monotonic() < give_up, "the crawl never used the proxy"
            time.sleep(0.02)
        doomed_proxy_py.kill()
        killed_at = time.time()
        code, log = crawl.wait(timeout=60)
    finally:
        crawl.kill()
    assert code == 0, log[-3000:]
    assert_pass_complete(mysql_url, end)

    dead = label(doomed_proxy_py.url())
    stats = dumped_stats(log, "productcrawler/proxy/")
    assert stats[f"productcrawler/proxy/rests/{dead}"] >= 1
    assert f"Proxy {dead} rests for" in log
    # Re-sent at once through the other proxy, not through the retry middleware.
    assert "retry/reason_count/connection_refused" not in log
    # Every request the API saw went through one of the two proxy.py, and what
    # arrived after the kill through the survivor.
    arrivals = clean_simulator.arrivals()
    by_dead = product_ids(doomed_proxy_py.forwarded())
    by_survivor = product_ids(proxy_py.forwarded()[before:])
    arrived, forwarded = Counter(a[1] for a in arrivals), Counter(by_dead + by_survivor)
    assert arrived - forwarded == Counter()
    # (Forwarded but never arrived: only what the dead one held when it was killed.)
    assert set(forwarded - arrived) <= set(by_dead)
    after = [a[1] for a in arrivals if a[0] > killed_at + 0.5]
    assert len(after) > CAP
    assert set(after) <= set(by_survivor)


# --- an https API: the proxy tunnels (CONNECT) ---------------------------------------


def test_an_https_api_through_proxy_py_stores_every_id_through_its_tunnels(
        clean_https_simulator, mysql_url, proxy_py, certificates):
    end = 200
    before = len(proxy_py.log_text())
    result = run_crawl("-a", f"end_id={end}", env=verifying(certificates), timeout=60, settings=settings_for(
        clean_https_simulator, mysql_url, proxy_py.url()))
    assert result.returncode == 0, result.stderr[-3000:]
    assert clean_https_simulator.base_url.startswith("https://127.0.0.1:")
    assert_pass_complete(mysql_url, end)
    assert sorted(a[1] for a in clean_https_simulator.arrivals()) == list(range(1, end + 1))
    # They went through proxy.py's tunnels: it saw CONNECTs, not the requests inside them.
    log = proxy_py.log_text()
    assert " forwarded CONNECT " in log and " forwarded GET " not in log[before:]


def test_proxy_py_refusing_the_tunnel_with_407_stops_the_crawl_as_a_407_response_does(
        clean_https_simulator, mysql_url, proxy_py, certificates):
    # Before: aiohttp's ClientHttpProxyError was an unclear failure, retried, then the no-answer stop.
    started = time.monotonic()
    result = run_crawl("-a", "end_id=200", env=verifying(certificates), timeout=60, settings=settings_for(
        clean_https_simulator, mysql_url, proxy_py.url(password="wrong-pass")))
    assert result.returncode == 3, result.stderr[-3000:]
    assert time.monotonic() - started < 20
    errors = log_lines(result.stderr, "ERROR")
    assert len(errors) == 1, errors
    assert (f"every proxy (1) answered 407 Proxy Authentication Required and none answered anything else; "
            f"check the credentials in PROXY_URLS (http://{USER}:***@127.0.0.1:{proxy_py.port})") in errors[0]
    assert "wrong-pass" not in result.stderr + result.stdout
    assert "Finished (guard_proxy_auth_failures)" in result.stderr
    assert "retry/reason_count" not in result.stderr
    stats = dumped_stats(result.stderr, "productcrawler/proxy/")
    assert stats["productcrawler/proxy/failure_reason/http_407"] >= 1
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products") == [(0,)]
    assert clean_https_simulator.arrivals() == []


# --- every proxy down, or unable to reach the API ---------------------------------------


def test_proxies_killed_for_real_stop_the_crawl_after_guard_no_answers_seconds_and_the_next_run_resumes(
        clean_simulator, mysql_url, proxy_py, doomed_proxy_py, tmp_path):
    end, silence = CAP * 20, 4
    second = ProxyPy(tmp_path / "second", user=USER, password=PASSWORD)
    (tmp_path / "second").mkdir()
    second.start()
    urls = (doomed_proxy_py.url(), second.url())
    crawl = LoggedCrawl(crawl_command("-a", f"end_id={end}", settings={
        **settings_for(clean_simulator, mysql_url, *urls), "GUARD_NO_ANSWERS_SECONDS": silence}))
    try:
        give_up = time.monotonic() + 30
        while stored_count(mysql_url) < CAP:
            assert crawl.process.poll() is None, "".join(crawl.log)[-3000:]
            assert time.monotonic() < give_up, "the crawl stored nothing"
            time.sleep(0.05)
        doomed_proxy_py.kill()
        second.kill()
        killed = time.monotonic()
        code, log = crawl.wait(timeout=120)
    finally:
        crawl.kill()
        second.kill()
    stopped_after = time.monotonic() - killed
    assert code == 3, log[-3000:]
    # Not before GUARD_NO_ANSWERS_SECONDS of nothing through any proxy, and soon after (was: never).
    assert silence <= stopped_after < silence + 10, stopped_after
    errors = log_lines(log, "ERROR")
    assert len(errors) == 1, errors
    assert "the proxies stopped carrying requests" in errors[0]
    for url in urls:
        assert f"http://{USER}:***@127.0.0.1:{ProxyPy.port_of(url)}: connection_refused" in errors[0]
    assert PASSWORD not in log
    assert "Finished (guard_proxies_down)" in log
    # Nothing lost: no id recorded failed, the rest stay pending for the next run.
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'failed'") == [(0,)]
    assert stored_count(mysql_url) < end - CAP
    # Which ids the next run fetches is asserted, not its rate: the rest go at 4 times the cap.
    resume = {**settings_for(clean_simulator, mysql_url, proxy_py.url()), "MAX_REQUESTS_PER_SECOND": 4 * CAP}
    result = run_crawl("-a", f"end_id={end}", timeout=120, settings=resume)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resuming pass" in result.stderr
    assert_pass_complete(mysql_url, end)


def test_proxies_not_running_at_start_stop_the_crawl_at_once(clean_simulator, mysql_url, doomed_proxy_py):
    url = doomed_proxy_py.url()
    doomed_proxy_py.kill()  # its port: nothing listens there now
    started = time.monotonic()
    result = run_crawl("-a", "end_id=200", timeout=60, settings=settings_for(clean_simulator, mysql_url, url))
    assert result.returncode == 3, result.stderr[-3000:]
    assert time.monotonic() - started < 20  # was: waited for ever
    errors = log_lines(result.stderr, "ERROR")
    assert len(errors) == 1 and "no proxy carried a single request" in errors[0], errors
    assert f"http://{USER}:***@127.0.0.1:{ProxyPy.port_of(url)}: connection_refused" in errors[0]
    assert "Finished (guard_proxies_down)" in result.stderr
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_proxy_py_unable_to_reach_the_api_stops_the_crawl_and_records_nothing(mysql_url, proxy_py, scheme):
    # proxy.py answers 502 Bad Gateway (a response for http, a refused CONNECT for https)
    # when nothing listens at API_BASE_URL. Before, each id was recorded failed (http_502).
    with socket.socket() as bound:  # bound, not listening: connections to it are refused
        bound.bind(("127.0.0.1", 0))
        api = f"{scheme}://127.0.0.1:{bound.getsockname()[1]}/v1"
        result = run_crawl("-a", "end_id=200", timeout=120, settings={
            "API_BASE_URL": api, "DATABASE_URL": mysql_url, "MAX_REQUESTS_PER_SECOND": CAP,
            "PROXY_URLS": proxy_py.url(), "RETRY_BACKOFF_BASE": 0.1})
    assert result.returncode == 3, result.stderr[-3000:]
    errors = log_lines(result.stderr, "ERROR")
    assert len(errors) == 1 and "20 ids in a row ended with no answer" in errors[0], errors
    # It was proxy.py's 502 (its port in the last error), and the message names the proxies too.
    assert "502" in errors[0] and f"127.0.0.1:{proxy_py.port}" in errors[0] and "PROXY_URLS" in errors[0]
    assert PASSWORD not in result.stderr
    assert "Finished (guard_no_answers)" in result.stderr
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]
