"""Scrapy's aiohttp download handler, without the per-response work this crawl pays for nothing.

Scrapy's :class:`AiohttpDownloadHandler` is general: every response sends the
``headers_received`` and ``bytes_received`` signals (so that a receiver can
stop the download), copies the request's headers twice, builds a new
``aiohttp.ClientTimeout``, parses the peer's IP address and guesses the
response class from scratch, for answers that all come from the same API with
the same headers (what that costs: docs/design-notes.md#the-lean-aiohttp-download-handler).

:class:`LeanAiohttpDownloadHandler` keeps Scrapy's session, connection pool,
TLS context (verifying certificates: ``download/tls.py``), proxy handling
(``meta["proxy"]`` with ``Proxy-Authorization``) and exception classes, and
keeps every documented per-request meta key (``download_timeout``, ``download_maxsize``, ``download_warnsize``,
``download_fail_on_dataloss``, ``verbatim_url``; ``download_latency`` is set).
It differs only in how a response is read:

- the two signals are sent only when something listens to them, and then the
  whole download goes through Scrapy's own code, so ``StopDownload`` works as
  documented; the same for ``bindaddress`` meta and TLS debug logging;
- the request's headers go to aiohttp as they are, without a copy;
- the response's headers are the bytes received (Scrapy's handler re-encodes
  aiohttp's decoded strings, and raises ``UnicodeEncodeError`` on a header
  value that is not UTF-8, where this one returns the response);
- timeouts, IP addresses and response classes are computed once per distinct
  value and kept, the last two in bounded memos (an API or its proxies choose
  those values, and could otherwise grow the memo without end);
- an answer whose connection gave aiohttp no peer address (the socket was
  gone as its transport was made) is a response with ``ip_address=None``, as
  Scrapy's HTTP/1.1 handler gives it and ``Response.ip_address`` allows: Scrapy's
  aiohttp handler asserts there is one, which would turn an answer into an
  error no retry handles and that the guard would blame on ``DOWNLOAD_HANDLERS``.

It is also where the API's credential goes in (``API_AUTH``, ``API_KEY``,
``API_HEADERS``: ``config/auth.py``), on the way to aiohttp and only for the
API's own URLs: the request itself never holds the key, so no queue, log line
(Scrapy's ``Crawled``/``Retrying``/error lines, ``scrapy fetch``), stats or
retry copy of it can show it; an error whose message would is raised with the
key masked and without the library's error chained. Scrapy's own path (above)
sends through :meth:`_make_request`, which does the same.

The class is a subclass of Scrapy's handler (in a private module in Scrapy
2.19: one more reason Scrapy is pinned) and overrides its documented hooks and
``download_request``; nothing of Scrapy's is patched.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import ssl
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn, cast

import aiohttp
import yarl
from pydispatch.dispatcher import getAllReceivers, liveReceivers
from scrapy import signals
from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler
from scrapy.exceptions import ResponseDataLossError
from scrapy.http import Headers, Response
from scrapy.responsetypes import responsetypes
from scrapy.utils._download_handlers import get_dataloss_msg, get_warnsize_msg

from productcrawler.config import mask_credentials
from productcrawler.config.crawler import crawl_config
from productcrawler.download.errors import scrapy_error
from productcrawler.download.tls import api_ssl_context, certificate_refusal
from productcrawler.meta import WRITE_STARTED

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from ipaddress import IPv4Address, IPv6Address

    from scrapy import Request
    from scrapy.core.downloader.handlers._aiohttp import _ClientResponse
    from scrapy.crawler import Crawler

    from productcrawler.config.auth import ApiAuth

logger = logging.getLogger(__name__)

def _scrapy_error(error: BaseException, request: Request, timeout: float) -> Exception:
    if isinstance(error, TimeoutError):  # Scrapy's message: the URL and the timeout
        message = f"Getting {request.url} took longer than {timeout} seconds."
    elif isinstance(error, aiohttp.ClientConnectorCertificateError):  # which check failed, for which host
        message = certificate_refusal(error)
    else:  # A proxy's refusal of a CONNECT (an https API through a proxy) names the proxy's URL, password and all.
        message = mask_credentials(str(error))
    return scrapy_error(error, message)


def _raise(error: Exception, cause: BaseException, auth: ApiAuth | None) -> NoReturn:
    """Raise ``error`` (from ``cause``); sent with a credential, with any form of it in the message masked.

    aiohttp's own error (the cause) may quote the URL sent, key and all: it is
    then not chained, since a traceback would print it.
    """
    if auth is not None:
        message = str(error)
        scrubbed = auth.scrub(message)
        if scrubbed != message or auth.scrub(str(cause)) != str(cause):
            raise type(error)(scrubbed) from None
    raise error from cause


#: The header aiohttp sends for an empty body given as b"" (Scrapy's handler), added when the body is None.
_NO_BODY = ("Content-Length", "0")

#: Distinct peers remembered; more than this (many proxies) starts the memo again.
_MAX_PEERS = 256

#: Distinct (Content-Type, Content-Encoding) pairs remembered: one API sends one or two; the bound holds
#: the memo's memory at a few hundred KB whatever an API sends (an 8 KB value per answer would add 15 MB
#: per 2,000 answers to an unbounded one).
MAX_CONTENT_TYPES = 32


@functools.lru_cache(maxsize=MAX_CONTENT_TYPES)
def class_for_content_type(content_type: bytes | None, content_encoding: bytes | None) -> type[Response]:
    """Scrapy's Response class for these header values alone: ``Response`` where they do not decide it."""
    if content_type is None:
        return Response
    return responsetypes.from_content_type(content_type, content_encoding)


class LeanAiohttpDownloadHandler(AiohttpDownloadHandler):
    """Scrapy's aiohttp handler with a lean path for a response nobody asked to stop."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        config = crawl_config(crawler)
        # Scrapy's context verifies nothing by default; the API's certificate is verified (download/tls.py).
        self._ssl_context = api_ssl_context(self._ssl_context, config.api, crawler)
        self._sender = crawler.signals.sender
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._addresses: dict[str, IPv4Address | IPv6Address] = {}
        self._auth: ApiAuth | None = config.api.auth

    async def download_request(self, request: Request) -> Response:
        if self._tls_verbose_logging or request.meta.get("bindaddress") or self._download_watched():
            return await super().download_request(request)
        return await self._download(request)

    def _download_watched(self) -> bool:
        """Whether a receiver may stop downloads (``StopDownload``): then Scrapy's path sends the signals."""
        return any(any(liveReceivers(getAllReceivers(self._sender, signal)))
                   for signal in (signals.headers_received, signals.bytes_received))

    def _wire(self, request: Request, headers: list[tuple[str, str]]) -> tuple[str | yarl.URL, ApiAuth | None]:
        """The URL to send and the credential, which ``headers`` now carries, if it goes to this URL."""
        url = request.url
        auth = self._auth
        if auth is not None and auth.sends_to(url):
            url = auth.url_for(url)
            headers += auth.headers
        else:
            auth = None
        return (yarl.URL(url, encoded=True) if request.meta.get("verbatim_url") else url), auth

    async def _download(self, request: Request) -> Response:
        meta = request.meta
        timeout = meta.get("download_timeout", self._DEFAULT_CONNECT_TIMEOUT)
        headers = self._headers_to_send(request)
        url, auth = self._wire(request, headers)
        started = time.monotonic()
        try:
            # An empty body is None: aiohttp then writes the request in this call, where with b""
            # (Scrapy's way) it writes it from a task of its own, a turn of the event loop later (on
            # Python < 3.12), after the rate limit's last check (ratelimit/handler.py). The
            # "Content-Length: 0" aiohttp sends for b"" is among the headers, so the API sees the same request.
            async with self._session.request(
                request.method, url, data=request.body or None, headers=headers,
                timeout=self._timeout(timeout), ssl=self._ssl_for(request), allow_redirects=False,
                proxy=self._extract_proxy_url_with_creds(request),
            ) as sent:
                response = cast("_ClientResponse", sent)  # the session's response_class
                meta["download_latency"] = time.monotonic() - max(started, meta.get(WRITE_STARTED, started))
                received = self._extract_headers(response)
                body, flags = await self._read_body(response, request, received)
                return self._response(response, request, received, body, flags)
        except (TimeoutError, aiohttp.ClientError) as error:
            _raise(_scrapy_error(error, request, timeout), error, auth)

    @asynccontextmanager
    async def _make_request(self, request: Request, timeout: float) -> AsyncIterator[_ClientResponse]:
        """Scrapy's hook for its own path: its request, with the credential added as in :meth:`_download`."""
        headers = self._request_headers(request).to_tuple_list()
        url, auth = self._wire(request, headers)
        try:
            async with await self._session.request(
                request.method, url, data=request.body, headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout), ssl=self._ssl_context, allow_redirects=False,
                proxy=self._extract_proxy_url_with_creds(request),
            ) as response:
                yield cast("_ClientResponse", response)  # the session's response_class
        except (TimeoutError, aiohttp.ClientError) as error:
            _raise(_scrapy_error(error, request, timeout), error, auth)

    @staticmethod
    def _headers_to_send(request: Request) -> list[tuple[str, str]]:
        """The request's headers for aiohttp, but Proxy-Authorization (it goes into the proxy URL).

        With an empty body, also the ``Content-Length: 0`` aiohttp would add for Scrapy's ``data=b""``.
        """
        encoding = request.headers.encoding
        headers = [(name.decode(encoding), value.decode(encoding))
                   for name, values in request.headers.items() if name != b"Proxy-Authorization"
                   for value in values]
        if not request.body and b"Content-Length" not in request.headers:
            headers.append(_NO_BODY)
        return headers

    def _ssl_for(self, request: Request) -> ssl.SSLContext | bool:
        # The verifying TLS context wherever TLS is spoken: an https URL, or an https proxy (aiohttp uses
        # the same argument for the TLS to the proxy). Otherwise aiohttp's default, which it never
        # uses, but names in a connection error as "ssl:default" rather than as "ssl:<SSLContext ...>".
        if request.url.startswith("https:") or str(request.meta.get("proxy") or "").startswith("https:"):
            return self._ssl_context
        return True

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
        return timeout

    async def _read_body(self, response: _ClientResponse, request: Request,
                         headers: Headers) -> tuple[bytes, list[str] | None]:
        """The body, within ``download_maxsize``; warns past ``download_warnsize``, as Scrapy's handler does."""
        maxsize: int = request.meta.get("download_maxsize", self._default_maxsize)
        warnsize: int = request.meta.get("download_warnsize", self._default_warnsize)
        expected = response.content_length
        if maxsize and expected and expected > maxsize:
            self._cancel_maxsize(expected, maxsize, request, expected=True)
        warned = False
        if warnsize and expected and expected > warnsize:
            warned = True
            logger.warning(get_warnsize_msg(expected, warnsize, request, expected=True))
        chunks: list[bytes] = []
        received = 0
        try:
            async for chunk in response.content.iter_any():
                chunks.append(chunk)
                received += len(chunk)
                if maxsize and received > maxsize:
                    self._cancel_maxsize(received, maxsize, request, expected=False)
                if warnsize and received > warnsize and not warned:
                    warned = True
                    logger.warning(get_warnsize_msg(received, warnsize, request, expected=False))
        except aiohttp.ClientPayloadError as error:
            if not request.meta.get("download_fail_on_dataloss", self._fail_on_dataloss):
                return b"".join(chunks), ["dataloss"]
            if not self._fail_on_dataloss_warned:
                logger.warning(get_dataloss_msg(request.url))
                self._fail_on_dataloss_warned = True
            raise ResponseDataLossError(str(error)) from error
        return b"".join(chunks), None

    def _response(self, response: _ClientResponse, request: Request, headers: Headers,
                  body: bytes, flags: list[str] | None) -> Response:
        kwargs: dict[str, Any] = self._build_base_response_args(response, request, headers)
        return self._response_class(headers, request.url, body)(body=body, flags=flags, **kwargs)

    @staticmethod
    def _response_class(headers: Headers, url: str, body: bytes) -> type[Response]:
        """Scrapy's choice of Response class; from the memo when the content type alone decides it."""
        if b"Content-Disposition" not in headers:  # a file name would make every key new
            response_class = class_for_content_type(headers.get(b"Content-Type"), headers.get(b"Content-Encoding"))
            if response_class is not Response:
                return response_class
        return responsetypes.from_args(headers=headers, url=url, body=body)

    # Scrapy's hooks, also used by its own path (the one with signals).

    @staticmethod
    def _extract_headers(response: _ClientResponse) -> Headers:
        return Headers(response.raw_headers)

    def _build_base_response_args(self, response: _ClientResponse, request: Request,  # type: ignore[override]
                                  headers: Headers) -> Any:  # Scrapy's is a staticmethod; ours reads self
        version = response.version
        if response._ssl_object is not None:
            certificate = response._ssl_object.getpeercert(binary_form=True)
        else:
            certificate = None
        return {"status": response.status, "url": request.url, "headers": headers, "certificate": certificate,
                "ip_address": self._address(response._peername[0]) if response._peername else None,
                "protocol": f"HTTP/{version.major}.{version.minor}" if version else "HTTP/1.1"}

    def _address(self, host: str) -> IPv4Address | IPv6Address:
        address = self._addresses.get(host)
        if address is None:
            if len(self._addresses) >= _MAX_PEERS:
                self._addresses.clear()
            address = self._addresses[host] = ipaddress.ip_address(host)
        return address
