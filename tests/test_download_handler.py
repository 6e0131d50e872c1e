"""LeanAiohttpDownloadHandler beside Scrapy's AiohttpDownloadHandler: the same answers from a local server.

Each test downloads the same request with Scrapy's handler (the reference) and
with ours, each built from a real crawler, on the crawl's reactor loop, from an
aiohttp.web server on that loop (port 0), and asserts that both give the same
outcome and that the outcome is the documented one. Scrapy's own test suite
run against our handler is bench/scrapy_handler_tests.py (by hand: it needs
Scrapy's sdist).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from aiohttp import web
from scrapy import Request, signals
from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
    StopDownload,
    UnsupportedURLSchemeError,
)
from scrapy.http import HtmlResponse, JsonResponse, Response, TextResponse
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from w3lib.http import basic_auth_header

from productcrawler import settings as project_settings
from productcrawler.download.errors import known_reason
from productcrawler.download.handler import (
    MAX_CONTENT_TYPES,
    LeanAiohttpDownloadHandler,
    _scrapy_error,
    class_for_content_type,
)
from tests.support.reactor import LoopServer, on_reactor_loop

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

SCRAPY, OURS = AiohttpDownloadHandler, LeanAiohttpDownloadHandler
PRODUCT = {"id": 7, "name": "Café crème", "price": 12.5}
BIG = b"x" * 2000
CHUNK, CHUNKS = b"y" * 500, 4
PARTIAL, DECLARED = b"z" * 400, 1000


LISTING = {"products": [{**PRODUCT, "id": n} for n in range(2000)]}
CONTENT_TYPE_SIZE = 8000


def content_type(n: int) -> str:
    return f"application/json; x-n={n}; x-pad={'p' * CONTENT_TYPE_SIZE}"[:CONTENT_TYPE_SIZE]


class Server(LoopServer):
    """The API and a proxy, on the reactor loop, and every request it received."""

    def __init__(self, tls: Any = None) -> None:
        super().__init__(tls)
        self.received: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append({"method": request.method, "target": request.raw_path, "host": request.host,
                              "headers": list(request.raw_headers), "body": await request.read()})
        path = request.path
        if path == "/json":
            return web.json_response(PRODUCT, headers=[("X-Twice", "1"), ("X-Twice", "2")])
        if path == "/missing":
            return web.json_response({"error": "not found"}, status=404)
        if path == "/typed":  # a Content-Type of CONTENT_TYPE_SIZE bytes, different for each n
            return web.Response(body=b"{}", headers={"Content-Type": content_type(int(request.query["n"]))})
        if path == "/listing":  # compressed as the request's Accept-Encoding allows, by aiohttp's own encoder
            response = web.json_response(LISTING)
            response.enable_compression()
            return response
        if path == "/html":
            return web.Response(text="<html><body>7</body></html>", content_type="text/html")
        if path == "/delay":
            await asyncio.sleep(0.3)
            return web.Response(text="late")
        if path == "/hang":
            await asyncio.sleep(3)
            return web.Response(text="too late")
        if path == "/big":
            return web.Response(body=BIG)  # application/octet-stream, but text: a TextResponse
        if path == "/binary":
            return web.Response(body=bytes(range(256)))
        if path == "/stream":  # chunked: no Content-Length
            response = web.StreamResponse()
            await response.prepare(request)
            for _ in range(CHUNKS):
                await response.write(CHUNK)
                await asyncio.sleep(0.01)
            await response.write_eof()
            return response
        if path == "/truncated":  # promises DECLARED bytes, sends PARTIAL and hangs up
            response = web.StreamResponse(headers={"Content-Length": str(DECLARED)})
            await response.prepare(request)
            await response.write(PARTIAL)
            await asyncio.sleep(0.01)
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError
        return web.Response(text="ok")


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    yield from LoopServer.running(Server())


@pytest.fixture
def fresh(server: Server) -> Server:
    server.received.clear()
    return server


async def _download(handler_cls: type[AiohttpDownloadHandler], requests: list[Request], settings: dict[str, Any],
                    receivers: dict[object, Callable[..., Any]]) -> list[Response | Exception]:
    """Each request's outcome, one after the other, with one handler."""
    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": project_settings.DOWNLOAD_MAXSIZE,
                                         "DOWNLOAD_WARNSIZE": project_settings.DOWNLOAD_WARNSIZE, **settings})
    for signal, receiver in receivers.items():
        crawler.signals.connect(receiver, signal=signal)
    handler = build_from_crawler(handler_cls, crawler)
    outcomes: list[Response | Exception] = []
    try:
        for request in requests:
            try:
                outcomes.append(await handler.download_request(request))
            except Exception as error:  # noqa: BLE001 - the outcome under comparison
                outcomes.append(error)
    finally:
        await handler.close()
    return outcomes


def both(make_request: Callable[[], Request], caplog: pytest.LogCaptureFixture | None = None,
         receivers: dict[object, Callable[..., Any]] | None = None,
         **settings: Any) -> tuple[tuple[Any, Request, list[str]], tuple[Any, Request, list[str]]]:
    """(outcome, request, warnings logged) with Scrapy's handler, then the same with ours."""
    results = []
    for handler_cls in (SCRAPY, OURS):
        request = make_request()
        if caplog is not None:
            caplog.clear()
        (outcome,) = on_reactor_loop(_download(handler_cls, [request], settings, receivers or {}))
        warnings = [] if caplog is None else [
            record.getMessage() for record in caplog.records
            if record.levelno >= logging.WARNING and not record.name.startswith("aiohttp")  # the server's
            and "is experimental" not in record.getMessage()]
        results.append((outcome, request, warnings))
    return results[0], results[1]


def normalized(message: str) -> str:
    """A message without what differs between two runs: streamed sizes (how chunks arrive), object addresses."""
    message = re.sub(r" object at 0x[0-9a-f]+", " object", message)  # aiohttp's repr of the SSL context
    return re.sub(r"Received \d+ bytes", "Received N bytes", message)


def summary(outcome: Response | Exception) -> tuple[Any, ...]:
    """What a user of the handler sees; Date (the second it was sent) left out, messages normalized."""
    if isinstance(outcome, Exception):
        return type(outcome), normalized(str(outcome))
    headers = [(name, values) for name, values in outcome.headers.items() if name != b"Date"]
    return (type(outcome), outcome.url, outcome.status, headers, outcome.body, outcome.flags,
            outcome.ip_address, outcome.protocol)


def same(reference: Any, ours: Any) -> Any:
    """Assert ours matches Scrapy's; return ours."""
    assert summary(ours) == summary(reference)
    return ours


# --- responses ------------------------------------------------------------------


def test_a_json_answer_is_the_same_response(fresh: Server) -> None:
    (scrapy, _, _), (ours, _, _) = both(lambda: Request(fresh.url("/json")))
    response = same(scrapy, ours)
    assert type(response) is JsonResponse
    assert (response.status, response.json()) == (200, PRODUCT)
    assert response.headers.getlist("X-Twice") == [b"1", b"2"]
    assert response.headers[b"Content-Type"] == b"application/json; charset=utf-8"
    assert str(response.ip_address) == "127.0.0.1" and response.protocol == "HTTP/1.1"


def test_an_answer_without_a_peer_address_is_a_response_without_ip_address(fresh: Server) -> None:
    """aiohttp gives no peer address when the socket was gone as its transport was made (getpeername failed).

    Scrapy 2.19's aiohttp handler asserts there is one (AssertionError: no retry, and the guard
    would blame DOWNLOAD_HANDLERS); ours answers ``ip_address=None``, as Scrapy's HTTP/1.1 handler
    does when it has no peer, and as ``Response.ip_address`` allows.
    """
    async def scenario() -> tuple[BaseException | None, dict[str, Any]]:
        handler = build_from_crawler(OURS, get_crawler())
        request = Request(fresh.url("/json"))
        try:
            async with handler._session.get(request.url) as response:
                await response.read()
                assert response._peername is not None  # type: ignore[attr-defined]
                response._peername = None  # type: ignore[attr-defined]
                headers = handler._extract_headers(response)  # type: ignore[arg-type]
                try:
                    SCRAPY._build_base_response_args(response, request, headers)  # type: ignore[arg-type]
                    scrapys = None
                except AssertionError as error:
                    scrapys = error
                return scrapys, handler._build_base_response_args(response, request, headers)  # type: ignore[arg-type]
        finally:
            await handler.close()

    scrapys, ours = on_reactor_loop(scenario())
    assert isinstance(scrapys, AssertionError)  # when Scrapy's changes, look again at ours
    assert ours["ip_address"] is None and ours["status"] == 200 and ours["protocol"] == "HTTP/1.1"


@pytest.mark.parametrize(("path", "status", "response_class"),
                         [("/missing", 404, JsonResponse), ("/html", 200, HtmlResponse), ("/big", 200, TextResponse),
                          ("/binary", 200, Response)])
def test_status_and_response_class_are_scrapys(fresh: Server, path: str, status: int,
                                               response_class: type[Response]) -> None:
    (scrapy, _, _), (ours, _, _) = both(lambda: Request(fresh.url(path)))
    response = same(scrapy, ours)
    assert (type(response), response.status) == (response_class, status)


def test_a_handler_picks_each_response_class_by_its_own_body(server: Server) -> None:
    # Same headers (application/octet-stream), different bodies: the class is not one per Content-Type.
    requests = [server.url(path) for path in ("/binary", "/big", "/binary", "/json", "/big")]
    outcomes = [on_reactor_loop(_download(handler_cls, [Request(url) for url in requests], {}, {}))
                for handler_cls in (SCRAPY, OURS)]
    assert [type(response) for response in outcomes[1]] == [type(response) for response in outcomes[0]] == [
        Response, TextResponse, Response, JsonResponse, TextResponse]


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_distinct_content_types_from_the_api_hold_the_memo_at_its_bound(server: Server) -> None:
    """10,000 answers, each with its own 8 KB Content-Type: the memo keeps MAX_CONTENT_TYPES, RSS stays flat.

    Unbounded, the memo holds every value: about 80 MB more for these 10,000.
    """
    async def download_all(first: int, count: int) -> list[type[Response]]:
        handler = build_from_crawler(OURS, get_crawler())
        classes: list[type[Response]] = []
        try:
            for start in range(first, first + count, 100):
                batch = [handler.download_request(Request(server.url(f"/typed?n={n}")))
                         for n in range(start, start + 100)]
                classes += [type(response) for response in await asyncio.gather(*batch)]
        finally:
            await handler.close()
        return classes

    class_for_content_type.cache_clear()
    on_reactor_loop(download_all(0, 500))  # the connection pool, the allocator's arenas: all grown once
    before = resident_bytes()
    classes = on_reactor_loop(download_all(500, 10_000))
    grown = resident_bytes() - before
    assert set(classes) == {JsonResponse}
    assert grown < 20_000_000, f"RSS grew {grown / 1e6:.1f} MB"
    assert class_for_content_type.cache_info().currsize == MAX_CONTENT_TYPES


def test_distinct_peer_addresses_hold_their_memo_at_its_bound() -> None:
    """Each answer's peer address is memoised as an ip_address; 10,000 distinct peers (a proxy pool, DNS
    round robin) keep at most _MAX_PEERS of them, and a memoised one is the same object again."""
    from productcrawler.download.handler import _MAX_PEERS

    async def memoise_all() -> None:
        handler = build_from_crawler(OURS, get_crawler())
        try:
            for n in range(10_000):
                host = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
                assert str(handler._address(host)) == host
                assert len(handler._addresses) <= _MAX_PEERS
            assert handler._address("10.0.39.15") is handler._address("10.0.39.15")
        finally:
            await handler.close()

    on_reactor_loop(memoise_all())


def test_the_crawl_asks_for_compressed_answers_and_decodes_them(fresh: Server) -> None:
    """Scrapy's HttpCompressionMiddleware (on in the project's settings) around our handler: a listing
    page of 2,000 products travels as a tenth of its size or less."""
    path = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
    assert project_settings.DOWNLOADER_MIDDLEWARES.get(path, "Scrapy's default") is not None
    middleware = HttpCompressionMiddleware.from_crawler(get_crawler())
    request = Request(fresh.url("/listing"))
    middleware.process_request(request)
    (on_the_wire,) = on_reactor_loop(_download(OURS, [request], {}, {}))
    assert isinstance(on_the_wire, Response)
    sent = dict(fresh.received[0]["headers"])
    assert {b"gzip", b"deflate", b"br"} <= {coding.strip() for coding in sent[b"Accept-Encoding"].split(b",")}
    assert on_the_wire.headers[b"Content-Encoding"] in (b"gzip", b"deflate")
    response = middleware.process_response(request, on_the_wire)
    assert isinstance(response, JsonResponse) and response.json() == LISTING
    assert len(on_the_wire.body) * 10 <= len(response.body), (len(on_the_wire.body), len(response.body))


def test_the_server_receives_the_same_requests(fresh: Server) -> None:
    requests = [Request(fresh.url("/echo?id=7"), headers={"Accept": "application/json", "X-Api-Key": "k"}),
                Request(fresh.url("/echo"), method="POST", body=b'{"id": 7}',
                        headers={"Content-Type": "application/json"}),
                Request(fresh.url("/echo"), method="HEAD")]
    for request in requests:
        fresh.received.clear()
        both(request.copy)
        scrapy_sent, sent = fresh.received
        assert sent == scrapy_sent
        assert (sent["method"], sent["body"]) == (request.method, request.body)
        assert [(name, value) for name, value in sent["headers"] if name in request.headers] == [
            (name, value) for name, values in request.headers.items() for value in values]


def test_download_latency_is_set(fresh: Server) -> None:
    (scrapy, scrapy_request, _), (ours, request, _) = both(lambda: Request(fresh.url("/delay")))
    same(scrapy, ours)
    assert 0.3 <= scrapy_request.meta["download_latency"] < 2
    assert 0.3 <= request.meta["download_latency"] < 2


# --- failures -------------------------------------------------------------------


def test_download_timeout_raises_download_timeout_error(fresh: Server) -> None:
    (scrapy, _, _), (ours, _, _) = both(lambda: Request(fresh.url("/hang"), meta={"download_timeout": 0.2}))
    error = same(scrapy, ours)
    assert isinstance(error, DownloadTimeoutError)
    assert str(error) == f"Getting {fresh.url('/hang')} took longer than 0.2 seconds."


def test_connection_refused_raises_download_connection_refused_error() -> None:
    (scrapy, _, _), (ours, _, _) = both(lambda: Request("http://127.0.0.1:1/"))
    assert isinstance(scrapy, DownloadConnectionRefusedError) and isinstance(ours, DownloadConnectionRefusedError)
    # The one difference, on purpose: an http URL's error names no TLS context (it is never used).
    assert str(ours) == str(scrapy).replace(re.search(r"ssl:\S+ object at 0x[0-9a-f]+>", str(scrapy))[0],
                                            "ssl:default")


@pytest.mark.parametrize(("path", "expected"), [
    ("/big", f"Expected to receive {len(BIG)} bytes which is larger than download max size (1000)"),
    ("/stream", "Received N bytes which is larger than download max size (1000)"),
], ids=["content-length", "streamed"])
def test_past_maxsize_the_download_is_cancelled(fresh: Server, caplog: pytest.LogCaptureFixture, path: str,
                                                expected: str) -> None:
    (scrapy, _, scrapy_log), (ours, _, log) = both(
        lambda: Request(fresh.url(path), meta={"download_maxsize": 1000}), caplog)
    error = same(scrapy, ours)
    assert isinstance(error, DownloadCancelledError)
    assert summary(error)[1].startswith(expected)
    assert [normalized(line) for line in log] == [normalized(line) for line in scrapy_log]
    assert len(log) == 1 and expected in normalized(log[0])


@pytest.mark.parametrize(("path", "expected", "body"), [
    ("/big", f"Expected to receive {len(BIG)} bytes which is larger than download warn size (1000)", BIG),
    ("/stream", "Received N bytes which is larger than download warn size (1000)", CHUNK * CHUNKS),
], ids=["content-length", "streamed"])
def test_past_warnsize_a_warning_is_logged_once(fresh: Server, caplog: pytest.LogCaptureFixture, path: str,
                                                expected: str, body: bytes) -> None:
    (scrapy, _, scrapy_log), (ours, _, log) = both(
        lambda: Request(fresh.url(path), meta={"download_warnsize": 1000}), caplog)
    assert same(scrapy, ours).body == body
    assert [normalized(line) for line in log] == [normalized(line) for line in scrapy_log]
    assert len(log) == 1 and normalized(log[0]).startswith(expected)


def test_a_truncated_body_fails_with_data_loss(fresh: Server, caplog: pytest.LogCaptureFixture) -> None:
    (scrapy, _, scrapy_log), (ours, _, log) = both(lambda: Request(fresh.url("/truncated")), caplog,
                                                   DOWNLOAD_FAIL_ON_DATALOSS=True)
    assert isinstance(same(scrapy, ours), ResponseDataLossError)
    assert log == scrapy_log
    assert log == [f"Got data loss in {fresh.url('/truncated')}. If you want to process broken responses set "
                   "the setting DOWNLOAD_FAIL_ON_DATALOSS = False -- This message won't be shown in further requests"]


@pytest.mark.parametrize(("settings", "meta"), [({"DOWNLOAD_FAIL_ON_DATALOSS": False}, {}),
                                                ({}, {"download_fail_on_dataloss": False})],
                         ids=["setting", "meta"])
def test_a_truncated_body_is_flagged_dataloss_when_allowed(fresh: Server, settings: dict[str, Any],
                                                           meta: dict[str, Any]) -> None:
    (scrapy, _, _), (ours, _, _) = both(lambda: Request(fresh.url("/truncated"), meta=meta), **settings)
    response = same(scrapy, ours)
    assert (response.status, response.body, response.flags) == (200, PARTIAL, ["dataloss"])


# --- request options --------------------------------------------------------------


def test_a_proxy_gets_the_credentials_once(fresh: Server) -> None:
    def through_proxy() -> Request:
        return Request("http://api.test/v1/product/7", meta={"proxy": f"127.0.0.1:{fresh.port}"},
                       headers={"Proxy-Authorization": basic_auth_header("crawler", "pr0xy s3cret:")})

    (scrapy, _, _), (ours, _, _) = both(through_proxy)
    assert same(scrapy, ours).body == b"ok"
    scrapy_sent, sent = fresh.received
    assert sent == scrapy_sent
    assert (sent["target"], sent["host"]) == ("http://api.test/v1/product/7", "api.test")
    proxy_auth = [value for name, value in sent["headers"] if name.lower() == b"proxy-authorization"]
    assert proxy_auth == [basic_auth_header("crawler", "pr0xy s3cret:")]


@pytest.fixture(scope="module")
def tls_proxy(certificates: Any) -> Iterator[Server]:
    """The same server over TLS, with a certificate of a CA the system does not know."""
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates.server_cert, certificates.server_key)
    yield from LoopServer.running(Server(tls=context))


def test_an_http_request_through_an_https_proxy_speaks_tls_to_the_proxy_as_scrapys_does(
        tls_proxy: Server, certificates: Any) -> None:
    # The TLS to the proxy takes the handler's TLS context, which verifies (here with the proxy's CA,
    # API_CA_FILE; Scrapy's verifies nothing by default); it took aiohttp's default, the system's CAs only.
    tls_proxy.received.clear()
    (scrapy, _, _), (ours, _, _) = both(lambda: Request("http://api.test/v1/product/7",
                                                        meta={"proxy": tls_proxy.url("")}),
                                        API_CA_FILE=str(certificates.ca))
    assert same(scrapy, ours).body == b"ok"
    scrapy_sent, sent = tls_proxy.received
    assert sent == scrapy_sent
    assert (sent["target"], sent["host"]) == ("http://api.test/v1/product/7", "api.test")


def test_an_https_proxy_whose_certificate_fails_is_refused_before_anything_is_sent(tls_proxy: Server) -> None:
    tls_proxy.received.clear()
    (scrapy, _, _), (ours, _, _) = both(lambda: Request("http://api.test/v1/product/7",
                                                        meta={"proxy": tls_proxy.url("")}))
    assert scrapy.status == 200  # Scrapy's default: any certificate
    assert known_reason(ours) == "tls_certificate"
    assert f"the TLS certificate of 127.0.0.1:{tls_proxy.port} failed verification" in str(ours)
    assert len(tls_proxy.received) == 1  # Scrapy's request only


def test_proxy_authorization_without_a_proxy_is_not_sent(fresh: Server) -> None:
    both(lambda: Request(fresh.url("/echo"), headers={"Proxy-Authorization": basic_auth_header("a", "b")}))
    scrapy_sent, sent = fresh.received
    assert sent == scrapy_sent
    assert all(name.lower() != b"proxy-authorization" for name, _ in sent["headers"])


@pytest.mark.parametrize(("verbatim", "target"), [(True, "/echo/%7Eitem?q=a%2fb"), (False, "/echo/~item?q=a/b")])
def test_verbatim_url_sends_the_url_unchanged(fresh: Server, verbatim: bool, target: str) -> None:
    (scrapy, _, _), (ours, _, _) = both(lambda: Request(fresh.url("/echo/%7Eitem?q=a%2fb"),
                                                        meta={"verbatim_url": verbatim}))
    same(scrapy, ours)
    assert [sent["target"] for sent in fresh.received] == [target, target]


# --- signals ----------------------------------------------------------------------


def test_a_bytes_received_receiver_stops_the_download(fresh: Server) -> None:
    seen: list[int] = []

    def stop(data: bytes, request: Request, spider: Any) -> None:
        seen.append(len(data))
        raise StopDownload(fail=False)

    (scrapy, _, _), (ours, _, _) = both(lambda: Request(fresh.url("/stream")),
                                        receivers={signals.bytes_received: stop})
    for response in (scrapy, ours):
        assert isinstance(response, Response), response
        assert (response.status, response.flags) == (200, ["download_stopped"])
        assert 0 < len(response.body) < len(CHUNK * CHUNKS) and (CHUNK * CHUNKS).startswith(response.body)
    assert len(seen) == 2  # one chunk each, then stopped
    assert summary(ours)[:4] == summary(scrapy)[:4]


def test_a_proxy_password_in_a_library_error_never_reaches_the_scrapy_error() -> None:
    # aiohttp's refusal of a CONNECT through a proxy (an https API) names the proxy's URL, credentials and all.
    error = aiohttp.ClientError("407, message='Proxy Authentication Required', url='http://user:s3cret@proxy.test:3128'")
    converted = _scrapy_error(error, Request("https://api.test/v1/product/1"), 10)
    assert isinstance(converted, DownloadFailedError)
    assert "s3cret" not in str(converted) and "url='http://user:***@proxy.test:3128'" in str(converted)


def _connection_key() -> Any:
    return aiohttp.client_reqrep.ConnectionKey("api.test", 80, False, True, None, None, None)


@pytest.mark.parametrize(("error", "scrapy_error", "reason"), [
    (TimeoutError(), DownloadTimeoutError, "timeout"),
    (aiohttp.ConnectionTimeoutError(), DownloadTimeoutError, "timeout"),
    (aiohttp.ClientConnectorDNSError(_connection_key(), OSError(-2, "Name or service not known")),
     CannotResolveHostError, "dns_lookup_failed"),
    (aiohttp.ClientConnectorError(_connection_key(), ConnectionRefusedError(111, "Connection refused")),
     DownloadConnectionRefusedError, "connection_refused"),
    (aiohttp.ServerDisconnectedError(), DownloadFailedError, "response_failed"),
    (aiohttp.NonHttpUrlClientError("ftp://api.test/"), UnsupportedURLSchemeError, None),
], ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else None)
def test_an_aiohttp_error_is_raised_as_the_scrapy_error_its_reason_names(error, scrapy_error, reason) -> None:
    # One table (download/errors.py) says both what the handler raises and how the retry middleware names it.
    converted = _scrapy_error(error, Request("https://api.test/v1/product/1"), 10)
    assert type(converted) is scrapy_error
    assert known_reason(converted) == reason


def test_the_paced_handler_sends_what_scrapys_sends(fresh: Server) -> None:
    # The paced handler builds its session again around its own connector
    # (ratelimit/handler.py): the same requests on the wire, the same responses.
    from productcrawler.ratelimit.handler import PacedAiohttpDownloadHandler

    requests = [Request(fresh.url("/echo?id=7"), headers={"Accept": "application/json", "X-Api-Key": "k"}),
                Request(fresh.url("/echo"), method="POST", body=b'{"id": 7}',
                        headers={"Content-Type": "application/json"}),
                Request(fresh.url("/json"))]
    outcomes = {}
    for handler_cls in (SCRAPY, PacedAiohttpDownloadHandler):
        fresh.received.clear()
        responses = on_reactor_loop(_download(handler_cls, [r.copy() for r in requests],
                                              {"RATE_LIMIT_ENABLED": False}, {}))
        outcomes[handler_cls] = ([summary(response) for response in responses], list(fresh.received))
    assert outcomes[PacedAiohttpDownloadHandler] == outcomes[SCRAPY]
