"""What a download error is: the Scrapy exception it is raised as, and the short reason it is named by.

One table, :data:`DOWNLOAD_ERRORS`, row by row: the reason (``timeout``,
``connection_refused``...: the name in ``retry/reason_count/<reason>``, in
the log and in a stored failure), the Scrapy exception that stands for it,
the raw Twisted and built-in forms of the same error (Scrapy 2.19's handlers
wrap them, other handlers or code paths may let them through), and the
aiohttp errors the download handler raises as that Scrapy exception, as
Scrapy's own aiohttp handler does. The download handler converts with
:func:`scrapy_error`, the retry middleware, the spider and the proxy
middleware name with :func:`exception_reason`, and ``proxies/blame.py``
sorts those names into the proxy's failures and the unclear ones.
"""

from __future__ import annotations

import re
import ssl
from typing import NamedTuple

import aiohttp
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
    UnsupportedURLSchemeError,
)
from twisted.internet import defer
from twisted.internet.error import (
    ConnectError,
    ConnectionDone,
    ConnectionLost,
    DNSLookupError,
    TCPTimedOutError,
)
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefusedError
from twisted.internet.error import TimeoutError as TxTimeoutError
from twisted.web.client import ResponseFailed

#: The reason of a certificate that failed verification.
TLS_CERTIFICATE = "tls_certificate"


class TlsCertificateError(DownloadFailedError):
    """The server's TLS certificate failed verification (``tls_certificate``): nothing was sent to it.

    Not retried (the same certificate comes back) and never blamed on a proxy
    that carried the tunnel; the guard stops the crawl on the first one.
    """


class DownloadError(NamedTuple):
    """One kind of download error."""

    reason: str | None
    """Its short, stable name; None for an error the crawl does not name (a URL no handler takes)."""
    scrapy: type[Exception] | None
    """The Scrapy exception a download handler raises for it."""
    raw: tuple[type[BaseException], ...] = ()
    """Twisted's and Python's own forms of it."""
    aiohttp: tuple[type[BaseException], ...] = ()
    """aiohttp's forms of it, raised by the download handler as ``scrapy``."""


# Most specific first, for both lookups: a Twisted TCPTimedOutError is a
# ConnectError, aiohttp's DNS and certificate errors are connector errors, a builtin
# TimeoutError or ConnectionError is an OSError.
DOWNLOAD_ERRORS: tuple[DownloadError, ...] = (
    DownloadError(TLS_CERTIFICATE, TlsCertificateError, (ssl.SSLCertVerificationError,),
                  (aiohttp.ClientConnectorCertificateError,)),
    DownloadError("timeout", DownloadTimeoutError,
                  (TxTimeoutError, TCPTimedOutError, defer.TimeoutError, TimeoutError), (TimeoutError,)),
    DownloadError("dns_lookup_failed", CannotResolveHostError, (DNSLookupError,), (aiohttp.ClientConnectorDNSError,)),
    DownloadError("connection_refused", DownloadConnectionRefusedError,
                  (TxConnectionRefusedError, ConnectionRefusedError), (aiohttp.ClientConnectorError,)),
    DownloadError(None, UnsupportedURLSchemeError, (), (aiohttp.InvalidUrlClientError, aiohttp.NonHttpUrlClientError)),
    DownloadError("response_data_loss", ResponseDataLossError),
    DownloadError("connection_lost", None,
                  (ConnectionLost, ConnectionResetError, ConnectionAbortedError, BrokenPipeError)),
    DownloadError("connection_closed", None, (ConnectionDone,)),
    DownloadError("tunnel_error", TunnelError),
    DownloadError("connect_error", None, (ConnectError, ConnectionError)),
    DownloadError("response_failed", DownloadFailedError, (ResponseFailed,)),
    DownloadError("os_error", None, (OSError,)),
)

_BY_TYPE: tuple[tuple[tuple[type[BaseException], ...], str | None], ...] = tuple(
    ((*((kind.scrapy,) if kind.scrapy else ()), *kind.raw), kind.reason) for kind in DOWNLOAD_ERRORS)


def known_reason(exception: BaseException) -> str | None:
    """The reason of a download error the table names; None for any other exception."""
    for types, reason in _BY_TYPE:
        if isinstance(exception, types):
            return reason
    return None


def exception_reason(exception: BaseException) -> str:
    """A short, stable name for a download error, used in stats and stored failures.

    ``ResponseFailed`` (raw, or wrapped in ``DownloadFailedError``) is named
    after the first of its underlying reasons we know, typically
    ``connection_lost`` when the server closed the connection mid-response.
    """
    failed = exception if isinstance(exception, ResponseFailed) else exception.__cause__
    if isinstance(failed, ResponseFailed):
        for cause in failed.reasons:
            value = getattr(cause, "value", cause)
            if isinstance(value, BaseException) and not isinstance(value, ResponseFailed):
                reason = known_reason(value)
                if reason is not None and reason != "response_failed":
                    return reason
    reason = known_reason(exception)
    if reason is not None:
        return reason
    # An exception added to RETRY_EXCEPTIONS: ValueError -> value_error
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type(exception).__name__).lower()


def exception_detail(exception: BaseException) -> str:
    """``Class: message`` of an exception, for a stored reason or a log line (no trailing colon without one)."""
    return f"{type(exception).__name__}: {exception}".strip().rstrip(":")


def scrapy_error(error: BaseException, message: str) -> Exception:
    """The Scrapy exception for aiohttp's ``error``, with ``message``: ``DownloadFailedError`` when no row names it."""
    for kind in DOWNLOAD_ERRORS:
        if kind.scrapy is not None and isinstance(error, kind.aiohttp):
            return kind.scrapy(message)
    return DownloadFailedError(message)


def tunnel_refusal(exception: BaseException) -> int | None:
    """The status with which a proxy refused a CONNECT tunnel (an https API), if that is the error."""
    cause = exception if isinstance(exception, aiohttp.ClientHttpProxyError) else exception.__cause__
    return cause.status if isinstance(cause, aiohttp.ClientHttpProxyError) else None
