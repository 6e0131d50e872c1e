"""What the proxy middleware blames on a proxy, and how it re-sends without using a retry.

Components built with ``get_crawler`` and called directly, as Scrapy's own
middleware tests do; the crawls are in test_proxy_crawl.py.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
import yarl
from multidict import CIMultiDict, CIMultiDictProxy
from scrapy import Request, Spider
from scrapy.exceptions import (
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotConfigured,
)
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from productcrawler.config.proxy_urls import parse_proxy_urls
from productcrawler.download.errors import DOWNLOAD_ERRORS
from productcrawler.meta import ABANDONED as META_ABANDONED
from productcrawler.meta import PROXY_AVOID as META_AVOID
from productcrawler.meta import PROXY_INDEX as META_PROXY
from productcrawler.meta import PROXY_SUSPECT as META_SUSPECT
from productcrawler.meta import RESEND_NOW
from productcrawler.proxies.blame import PROXY_FAILURE_REASONS, UNCLEAR_REASONS
from productcrawler.proxies.middleware import ProxyMiddleware
from productcrawler.proxies.outage import ProxyOutage

URL = "http://api.test/v1/product/7"
PROXIES = "http://u:pw@10.0.0.1:3128,http://10.0.0.2:3128,http://10.0.0.3:3128"


class ProductSpider(Spider):
    name = "products"


def make_mw(**settings: object) -> ProxyMiddleware:
    crawler = get_crawler(ProductSpider, settings_dict={"PROXY_URLS": PROXIES, **settings})
    return ProxyMiddleware.from_crawler(crawler)


def sent(mw: ProxyMiddleware, request: Request | None = None) -> Request:
    """``request`` as the middleware hands it to the downloader."""
    request = request or Request(URL, meta={"product_id": 7, "retry_times": 1})
    mw.pool._synced.set()
    asyncio.run(mw.process_request(request))
    return request


def failures(mw: ProxyMiddleware) -> dict[str, int]:
    return {k.rsplit("/", 1)[1]: v for k, v in mw.stats.get_stats().items()
            if k.startswith("productcrawler/proxy/failures/")}


def test_off_without_proxy_urls():
    with pytest.raises(NotConfigured):
        ProxyMiddleware.from_crawler(get_crawler(ProductSpider))


def test_requests_go_through_the_proxies_in_turn_with_their_credentials_outside_the_url():
    mw = make_mw()
    requests = [sent(mw) for _ in range(4)]
    assert [r.meta["proxy"] for r in requests] == ["http://10.0.0.1:3128", "http://10.0.0.2:3128",
                                                    "http://10.0.0.3:3128", "http://10.0.0.1:3128"]
    assert requests[0].headers[b"Proxy-Authorization"] == b"Basic dTpwdw=="
    assert b"Proxy-Authorization" not in requests[1].headers
    assert [r.meta["download_slot"] for r in requests[:2]] == ["proxy 10.0.0.1:3128", "proxy 10.0.0.2:3128"]


@pytest.mark.parametrize("failure", [DownloadConnectionRefusedError("refused"), 407])
def test_a_proxy_failure_is_sent_again_at_once_through_another_proxy_without_using_a_retry(failure):
    mw = make_mw()
    request = sent(mw)
    if isinstance(failure, int):
        again = mw.process_response(request, Response(URL, status=failure, request=request))
    else:
        again = mw.process_exception(request, failure)
    assert isinstance(again, Request)
    assert again.meta["retry_times"] == 1 and again.dont_filter
    assert again.meta[RESEND_NOW] is True and again.meta[META_AVOID] == 0
    assert "proxy" not in again.meta and META_PROXY not in again.meta
    assert b"Proxy-Authorization" not in again.headers
    assert failures(mw) == {"10.0.0.1:3128": 1}
    assert sent(mw, again).meta["proxy"] == "http://10.0.0.2:3128"


def test_an_unclear_failure_is_blamed_on_the_proxy_only_once_another_proxy_answered():
    mw = make_mw()
    request = sent(mw)
    compare = mw.process_exception(request, DownloadTimeoutError("slow"))
    assert isinstance(compare, Request) and compare.meta[META_SUSPECT] == [0, "timeout"]
    assert failures(mw) == {}
    sent(mw, compare)
    assert compare.meta["proxy"] != request.meta["proxy"]
    response = Response(URL, status=200, request=compare)
    assert mw.process_response(compare, response) is response
    assert failures(mw) == {"10.0.0.1:3128": 1}


@pytest.mark.parametrize("status", [403, 429, 502, 504])
def test_an_unclear_failure_that_follows_the_id_is_left_to_the_retry_middleware(status):
    mw = make_mw()
    request = sent(mw)
    compare = mw.process_response(request, Response(URL, status=status, request=request))
    assert isinstance(compare, Request)
    sent(mw, compare)
    response = Response(URL, status=status, request=compare)
    assert mw.process_response(compare, response) is response  # the retry middleware's now
    assert META_SUSPECT not in compare.meta
    assert failures(mw) == {}
    assert mw.stats.get_value("productcrawler/proxy/not_blamed") == 1


@pytest.mark.parametrize("status", [200, 404, 500, 503])
def test_any_other_answer_is_a_success_for_the_proxy(status):
    mw = make_mw()
    request = sent(mw)
    response = Response(URL, status=status, request=request)
    assert mw.process_response(request, response) is response
    assert mw.pool._deltas[0] == [1, 0]


def test_a_request_abandoned_before_it_was_sent_says_nothing_of_its_proxy():
    # The guard had stopped the crawl (WholesaleFailureGuard.refuse_unsent): the proxy never saw it.
    mw = make_mw()
    mw.process_exception(sent(mw), DownloadConnectionRefusedError("refused"))
    assert mw.outage.length == 1 and failures(mw) == {"10.0.0.1:3128": 1}
    request = sent(mw)
    request.meta[META_ABANDONED] = True
    assert mw.process_exception(request, IgnoreRequest("not sent: the guard stopped the crawl")) is None
    # Neither a failure nor "something went through": the proxies-down streak is as it was.
    assert mw.outage.length == 1 and failures(mw) == {"10.0.0.1:3128": 1}
    assert mw.pool._deltas[1] == [0, 0]


def test_per_proxy_metrics_by_label_and_none_without_a_pool():
    from prometheus_client import CollectorRegistry, generate_latest

    from productcrawler.proxies.metrics import ProxyStatsCollector

    mw = make_mw()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProxyStatsCollector(mw.crawler))
    assert generate_latest(registry) == b""
    request = sent(mw)
    mw.process_exception(request, DownloadConnectionRefusedError("refused"))
    mw.stats.set_value("productcrawler/proxy/score/10.0.0.1:3128", 80.0)
    text = generate_latest(registry).decode()
    assert 'productcrawler_proxy_requests_total{proxy="10.0.0.1:3128"} 1.0' in text
    assert 'productcrawler_proxy_failures_total{proxy="10.0.0.1:3128"} 1.0' in text
    assert 'productcrawler_proxy_score{proxy="10.0.0.1:3128"} 80.0' in text
    assert "productcrawler_proxy_resent_total 1.0" in text
    assert "pw" not in text


def test_without_proxy_urls_the_project_chain_has_no_proxy_middleware():
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager

    from productcrawler.settings import DOWNLOAD_HANDLERS, DOWNLOADER_MIDDLEWARES

    def chain(**settings: object) -> list[str]:
        # The project's handlers too: the rate limit refuses to start with one that does not pace.
        crawler = get_crawler(ProductSpider, settings_dict={"DOWNLOADER_MIDDLEWARES": DOWNLOADER_MIDDLEWARES,
                                                            "DOWNLOAD_HANDLERS": DOWNLOAD_HANDLERS,
                                                            **settings})
        return [type(mw).__name__ for mw in DownloaderMiddlewareManager.from_crawler(crawler).middlewares]

    assert "productcrawler.proxies.middleware.ProxyMiddleware" in DOWNLOADER_MIDDLEWARES
    assert "TrafficStats" in chain() and "ProxyMiddleware" not in chain()
    assert "ProxyMiddleware" in chain(PROXY_URLS=PROXIES)


def tunnel_refused(status: int) -> DownloadFailedError:
    """What the download handler raises when a proxy refuses a CONNECT (an https API) with ``status``."""
    info = aiohttp.RequestInfo(yarl.URL("http://10.0.0.1:3128"), "CONNECT", CIMultiDictProxy(CIMultiDict()))
    refusal = aiohttp.ClientHttpProxyError(info, (), status=status, message="refused")
    error = DownloadFailedError(str(refusal))
    error.__cause__ = refusal
    return error


def test_a_407_on_connect_counts_as_a_407_response():
    mw = make_mw()
    request = sent(mw)
    again = mw.process_exception(request, tunnel_refused(407))
    assert isinstance(again, Request) and again.meta[RESEND_NOW] is True and again.meta["retry_times"] == 1
    assert failures(mw) == {"10.0.0.1:3128": 1}
    assert mw.stats.get_value("productcrawler/proxy/failure_reason/http_407") == 1
    assert mw._answered is False  # still a credentials problem: the proxy-auth stop stays possible


@pytest.mark.parametrize("status", [403, 400, 503])
def test_any_other_refused_tunnel_is_the_proxys_failure(status):
    mw = make_mw()
    request = sent(mw)
    again = mw.process_exception(request, tunnel_refused(status))
    assert isinstance(again, Request) and META_SUSPECT not in again.meta
    assert failures(mw) == {"10.0.0.1:3128": 1}
    assert mw.stats.get_value(f"productcrawler/proxy/failure_reason/tunnel_{status}") == 1


@pytest.mark.parametrize("status", [502, 504])
def test_a_tunnel_refused_by_a_gateway_is_compared_through_another_proxy(status):
    mw = make_mw()
    request = sent(mw)
    compare = mw.process_exception(request, tunnel_refused(status))
    assert isinstance(compare, Request) and compare.meta[META_SUSPECT] == [0, f"tunnel_{status}"]
    assert failures(mw) == {}
    sent(mw, compare)
    assert mw.process_response(compare, Response(URL, status=200, request=compare)).status == 200
    assert failures(mw) == {"10.0.0.1:3128": 1}


def test_the_proxies_down_streak_grows_with_their_own_failures_and_any_answer_breaks_it():
    clock = [100.0]
    proxies = parse_proxy_urls(PROXIES)
    outage = ProxyOutage(proxies, enabled=True, seconds=60, clock=lambda: clock[0])
    assert outage.diagnosis() is None
    outage.failed(proxies[0], "connection_refused")
    # Before any answer in this run: at once, naming every proxy, password masked.
    text = outage.diagnosis()
    assert text is not None and "no proxy carried a single request" in text
    assert "http://u:***@10.0.0.1:3128: connection_refused" in text and "pw" not in text
    assert "http://10.0.0.2:3128: rested by another instance" in text
    outage.got_through(answer=True)
    clock[0] += 61
    assert outage.diagnosis() is None  # the answer broke the streak: no failure of their own since
    outage.failed(proxies[1], "connection_refused")
    clock[0] += 59.9
    assert outage.diagnosis() is None  # after answers: GUARD_NO_ANSWERS_SECONDS first
    clock[0] += 0.2
    assert "stopped carrying requests 60 s ago, after 1 answers" in outage.diagnosis()
    outage.got_through(answer=False)  # a timeout: the proxy is up, the no-answer streak's case
    assert outage.diagnosis() is None
    off = ProxyOutage(proxies, enabled=False, seconds=60)
    off.failed(proxies[0], "connection_refused")
    assert off.diagnosis() is None


@pytest.mark.parametrize(("through", "breaks"), [
    (DownloadTimeoutError("slow"), True),  # the proxy took the request: the no-answer streak's case
    (502, True),  # a gateway answered: the proxy is up
    (200, True),
    (407, False),  # the proxy's own failures
    (DownloadConnectionRefusedError("refused"), False),
    ("tunnel_407", False),
    ("tunnel_403", False),
    ("tunnel_502", True),  # the proxy is up, it could not reach the API
])
def test_what_breaks_the_proxies_down_streak(through, breaks):
    mw = make_mw()
    mw.process_exception(sent(mw), DownloadConnectionRefusedError("refused"))
    assert mw.outage.length == 1
    request = sent(mw)
    if isinstance(through, int):
        mw.process_response(request, Response(URL, status=through, request=request))
    elif isinstance(through, str):
        mw.process_exception(request, tunnel_refused(int(through.split("_")[1])))
    else:
        mw.process_exception(request, through)
    assert mw.outage.length == (0 if breaks else 2)


def test_after_an_operators_stop_proxies_that_refused_their_credentials_stop_nothing():
    # Ctrl-C first, then every proxy resting after a 407: the operator's stop decides the exit (0),
    # the request is abandoned, and no proxy-auth stop (exit 3) is made on top of it.
    from scrapy.exceptions import IgnoreRequest

    from productcrawler import stat_keys

    mw = make_mw(PROXY_SCORE_FAILURE=100)
    for _ in range(3):
        request = sent(mw)
        mw.process_exception(request, tunnel_refused(407))
    asyncio.run(mw.pool.sync())  # the rests take effect
    assert mw.pool.choose() is None and mw.pool.all_refused_credentials()
    mw.crawler.crawling = False
    with pytest.raises(IgnoreRequest):
        sent(mw)
    assert mw.stats.get_value(stat_keys.EXIT_REASON) is None


def test_every_reason_a_proxy_is_blamed_for_is_a_download_errors_reason() -> None:
    assert PROXY_FAILURE_REASONS | UNCLEAR_REASONS <= {kind.reason for kind in DOWNLOAD_ERRORS}
