"""The API's TLS certificate is verified, directly and through a proxy's tunnel: a bad one stops the crawl.

The download handler against real TLS servers (a self-signed certificate, one
of the test CA for the wrong host, one of a private CA trusted through
``API_CA_FILE`` or ``SSL_CERT_FILE``), then real crawls: against the https
simulator with those certificates, and through a CONNECT proxy that answers
the tunnel with a certificate of its own (tests/support/mitm_proxy.py). What
is asserted is what the servers saw (no request, no key), what was stored
(nothing), the exit code and the one ERROR line.
"""

from __future__ import annotations

import logging
import ssl
import time
from typing import TYPE_CHECKING, Any

import pytest
from scrapy import Request
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from productcrawler.config import ConfigError, CrawlConfig
from productcrawler.download.errors import TlsCertificateError, exception_reason
from productcrawler.download.handler import LeanAiohttpDownloadHandler
from simulator.process import SimulatorProcess
from tests.support.catalogue import CATALOG_VERSION
from tests.support.crawls import crawl_env, run_crawl, verifying
from tests.support.logs import dumped_stats, log_lines
from tests.support.mitm_proxy import MitmProxy, self_signed
from tests.support.reactor import LoopServer, on_reactor_loop
from tests.support.services import mysql_query

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from aiohttp import web

KEY = "tls-test-k3y"


# --- the download handler against real TLS servers ------------------------------------


class TlsServer(LoopServer):
    """An https server on the reactor's loop that records every request it read."""

    def __init__(self, cert: Path, key: Path) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        super().__init__(context)
        self.received: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        self.received.append(dict(request.headers))
        return web.json_response({"id": 1, "name": "real"})


@pytest.fixture(scope="module")
def self_signed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    yield from LoopServer.running(TlsServer(*self_signed(tmp_path_factory.mktemp("self-signed"), "127.0.0.1")))


@pytest.fixture(scope="module")
def localhost_server(certificates: Any) -> Iterator[TlsServer]:
    """A certificate of the test CA for localhost only, served at 127.0.0.1: the wrong host."""
    yield from LoopServer.running(TlsServer(certificates.localhost_cert, certificates.localhost_key))


@pytest.fixture(scope="module")
def private_ca_server(certificates: Any) -> Iterator[TlsServer]:
    """A certificate for 127.0.0.1 from the test CA, which the system does not know."""
    yield from LoopServer.running(TlsServer(certificates.server_cert, certificates.server_key))


def download(url: str, *, proxy: str | None = None, **settings: Any) -> Any:
    """The handler's outcome for one GET of ``url`` (a Response or the exception), with API_KEY set."""
    crawler = get_crawler(settings_dict={"API_KEY": KEY, "API_BASE_URL": url.rsplit("/", 1)[0], **settings})

    async def once() -> Any:
        handler = build_from_crawler(LeanAiohttpDownloadHandler, crawler)  # on the loop: aiohttp asks for it
        try:
            return await handler.download_request(Request(url, meta={"proxy": proxy} if proxy else {}))
        except Exception as error:  # noqa: BLE001 - the outcome under test
            return error
        finally:
            await handler.close()

    return on_reactor_loop(once())


def assert_refused(outcome: Any, server: TlsServer, check: str) -> None:
    assert isinstance(outcome, TlsCertificateError), outcome
    assert exception_reason(outcome) == "tls_certificate"
    assert f"the TLS certificate of 127.0.0.1:{server.port} failed verification: {check}" in str(outcome)
    assert server.received == []  # nothing was sent: no request, no key


def test_a_self_signed_certificate_is_refused_by_default(self_signed_server: TlsServer) -> None:
    self_signed_server.received.clear()
    assert_refused(download(self_signed_server.url("/v1/product/1")), self_signed_server, "self-signed certificate")


def test_a_certificate_for_another_host_is_refused_even_from_a_trusted_ca(localhost_server: TlsServer,
                                                                          certificates: Any) -> None:
    localhost_server.received.clear()
    outcome = download(localhost_server.url("/v1/product/1"), API_CA_FILE=str(certificates.ca))
    assert_refused(outcome, localhost_server,
                   "IP address mismatch, certificate is not valid for '127.0.0.1' (X509 error 64)")


def test_a_private_ca_is_trusted_through_api_ca_file_and_only_then(private_ca_server: TlsServer,
                                                                   certificates: Any) -> None:
    private_ca_server.received.clear()
    assert_refused(download(private_ca_server.url("/v1/product/1")), private_ca_server,
                   "unable to get local issuer certificate")
    response = download(private_ca_server.url("/v1/product/1"), API_CA_FILE=str(certificates.ca))
    assert response.status == 200
    assert [headers["Authorization"] for headers in private_ca_server.received] == [f"Bearer {KEY}"]


def test_ssl_cert_file_is_honoured_as_openssl_documents_it(private_ca_server: TlsServer, certificates: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
    assert download(private_ca_server.url("/v1/product/1")).status == 200


def test_scrapys_own_default_does_not_turn_verification_off(self_signed_server: TlsServer) -> None:
    # DOWNLOAD_VERIFY_CERTIFICATES is False in Scrapy's defaults: a default never counts, a given value does.
    assert isinstance(download(self_signed_server.url("/v1/product/1")), TlsCertificateError)
    lab = download(self_signed_server.url("/v1/product/1"), DOWNLOAD_VERIFY_CERTIFICATES=False)
    assert lab.status == 200


def test_api_tls_verify_false_accepts_any_certificate_with_a_warning(self_signed_server: TlsServer,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        response = download(self_signed_server.url("/v1/product/1"), API_TLS_VERIFY="false")
    assert response.status == 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "API_TLS_VERIFY" in
                r.getMessage()]
    assert len(warnings) == 1 and "is NOT verified" in warnings[0] and "read the API key" in warnings[0]


def test_through_a_proxy_that_answers_the_tunnel_itself_nothing_reaches_it(tmp_path: Path,
                                                                          private_ca_server: TlsServer,
                                                                          certificates: Any) -> None:
    with MitmProxy(tmp_path) as mitm:
        outcome = download(private_ca_server.url("/v1/product/1"), proxy=mitm.url, API_CA_FILE=str(certificates.ca))
    assert isinstance(outcome, TlsCertificateError), outcome
    assert "self-signed certificate" in str(outcome)
    assert mitm.seen.connects == [f"127.0.0.1:{private_ca_server.port}"]
    assert mitm.seen.handshakes == 0 and mitm.seen.requests == []


@pytest.mark.parametrize(("value", "words"), [
    ("/nonexistent/ca.pem", "is not a readable file"),
    ("{empty}", "cannot be read as PEM CA certificates"),
])
def test_a_bad_api_ca_file_is_a_configuration_error(tmp_path: Path, value: str, words: str) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=words) as raised:
        CrawlConfig.from_settings({"API_CA_FILE": value.format(empty=empty)})
    assert "API_CA_FILE=" in str(raised.value)


def test_a_bad_api_tls_verify_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="API_TLS_VERIFY='maybe' is not a boolean"):
        CrawlConfig.from_settings({"API_TLS_VERIFY": "maybe"})


# --- real crawls -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def self_signed_simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatorProcess]:
    cert, key = self_signed(tmp_path_factory.mktemp("self-signed-sim"), "127.0.0.1")
    with SimulatorProcess("--catalog-version", str(CATALOG_VERSION), "--tls-cert", str(cert), "--tls-key", str(key),
                          ca=cert) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def localhost_simulator(certificates: Any) -> Iterator[SimulatorProcess]:
    """Serves a certificate for localhost only; the crawl asks for 127.0.0.1 (the calls made here, localhost)."""
    with SimulatorProcess("--catalog-version", str(CATALOG_VERSION), "--tls-cert", str(certificates.localhost_cert),
                          "--tls-key", str(certificates.localhost_key), host="localhost",
                          ca=certificates.ca) as simulator:
        yield simulator


def crawl(base_url: str, mysql_url: str, env: dict[str, str], **settings: Any) -> Any:
    return run_crawl("-a", "end_id=200", env=env, timeout=90, settings={
        "API_BASE_URL": base_url, "DATABASE_URL": mysql_url, "API_KEY": KEY, "MAX_REQUESTS_PER_SECOND": 100,
        **settings})


def assert_stopped_for_the_certificate(result: Any, mysql_url: str, started: float, check: str) -> str:
    assert result.returncode == 3, result.stderr[-3000:]
    assert time.monotonic() - started < 30
    errors = log_lines(result.stderr, "ERROR")
    assert len(errors) == 1, errors
    assert "the API's TLS certificate was refused" in errors[0] and check in errors[0], errors[0]
    assert "Finished (guard_tls_certificate)" in result.stderr
    assert "retry/reason_count" not in result.stderr  # not retried: the same certificate comes back
    assert KEY not in result.stderr + result.stdout
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products") == [(0,)]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]
    return errors[0]


def test_a_crawl_of_an_api_with_a_self_signed_certificate_stops_with_exit_3_and_sends_nothing(
        self_signed_simulator, mysql_url):
    self_signed_simulator.set_faults(api_key=KEY)  # a request with the key would be answered, and recorded
    self_signed_simulator.reset()
    started = time.monotonic()
    result = crawl(self_signed_simulator.base_url, mysql_url, crawl_env())
    assert_stopped_for_the_certificate(result, mysql_url, started, "self-signed certificate")
    assert self_signed_simulator.arrivals() == []


def test_a_crawl_of_an_api_whose_certificate_names_another_host_stops_with_exit_3(
        localhost_simulator, mysql_url, certificates):
    localhost_simulator.set_faults(api_key=KEY)
    localhost_simulator.reset()
    base_url = localhost_simulator.base_url.replace("://localhost:", "://127.0.0.1:")
    started = time.monotonic()
    result = crawl(base_url, mysql_url, verifying(certificates))  # the CA is trusted: only the name is wrong
    assert_stopped_for_the_certificate(result, mysql_url, started, "IP address mismatch")
    assert localhost_simulator.arrivals() == []


def test_a_crawl_through_a_proxy_that_intercepts_the_tunnel_stops_and_the_proxy_is_not_blamed(
        clean_https_simulator, mysql_url, certificates, tmp_path):
    with MitmProxy(tmp_path) as mitm:
        started = time.monotonic()
        result = crawl(clean_https_simulator.base_url, mysql_url, verifying(certificates), PROXY_URLS=mitm.url)
    error = assert_stopped_for_the_certificate(result, mysql_url, started, "self-signed certificate")
    assert "PROXY_URLS" in error and "TLS interception" in error
    assert mitm.seen.connects and mitm.seen.handshakes == 0 and mitm.seen.requests == []
    assert mitm.seen.authorizations() == []
    assert clean_https_simulator.arrivals() == []
    # Not the proxy's failure: not rested, not counted, not "every proxy is down".
    stats = dumped_stats(result.stderr, "productcrawler/proxy/")
    assert not [name for name in stats if "failure_reason" in name or "rests" in name], stats
    assert "guard_proxies_down" not in result.stderr and "connection_refused" not in result.stderr


def test_with_api_tls_verify_false_the_intercepting_proxy_reads_the_key_and_forges_rows(
        clean_https_simulator, mysql_url, certificates, tmp_path):
    # The lab switch, and proof that the proxy above would have read the key had the crawl let it.
    with MitmProxy(tmp_path) as mitm:
        result = run_crawl("-a", "end_id=10", env=verifying(certificates), timeout=90, settings={
            "API_BASE_URL": clean_https_simulator.base_url, "DATABASE_URL": mysql_url, "API_KEY": KEY,
            "PROXY_URLS": mitm.url, "API_TLS_VERIFY": "false"})
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in log_lines(result.stderr, "WARNING") if "API_TLS_VERIFY is false" in line]
    assert len(warnings) == 1, warnings
    assert set(mitm.seen.authorizations()) == {f"Bearer {KEY}"}
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products WHERE name = 'forged by the proxy'") == [(10,)]
    assert clean_https_simulator.arrivals() == []
