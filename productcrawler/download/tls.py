"""The API's TLS: the context the download handler speaks it with, and what a refused certificate says.

Scrapy's aiohttp handler builds its context from ``DOWNLOAD_VERIFY_CERTIFICATES``,
off by default: any certificate is accepted, so whoever sits on the path (a
proxy answering CONNECT with a certificate of its own included) reads the API
key and answers in the API's name. :func:`api_ssl_context` keeps Scrapy's
context (its TLS versions, ciphers, ``SSLKEYLOGFILE``) and turns verification
on unless ``API_TLS_VERIFY`` is false: the chain against the system's CAs
(OpenSSL's default paths, which ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
replace) plus those of ``API_CA_FILE``, and the host name against the
certificate. The same context verifies the API inside a proxy's tunnel and an
https proxy's own certificate (aiohttp uses one ``ssl`` argument for both).

:func:`certificate_refusal` words aiohttp's verification error for the
``tls_certificate`` reason (``errors.py``): which check failed, for which host.
"""

from __future__ import annotations

import logging
import ssl
import weakref
from typing import TYPE_CHECKING

import aiohttp

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from productcrawler.config.sections import ApiConfig

logger = logging.getLogger(__name__)

#: Crawlers warned about API_TLS_VERIFY=false: Scrapy builds one handler per scheme, the warning is said once.
_WARNED: weakref.WeakSet[Crawler] = weakref.WeakSet()


def api_ssl_context(context: ssl.SSLContext, config: ApiConfig, crawler: Crawler) -> ssl.SSLContext:
    """Scrapy's ``context``, verifying certificates as ``config`` says (it is changed in place and returned)."""
    if not config.tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if crawler in _WARNED:
            return context
        _WARNED.add(crawler)
        logger.warning(
            "API_TLS_VERIFY is false: the API's TLS certificate is NOT verified%s. Anyone on the way to the "
            "API, a proxy of PROXY_URLS included, can read the API key and answer in the API's name, and "
            "what it answers is stored. Use this in a lab only; trust a private CA with API_CA_FILE instead.",
            f" (API_CA_FILE={config.ca_file!r} is not used)" if config.ca_file else "")
        return context
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    context.load_default_certs()  # the system's CAs, or SSL_CERT_FILE / SSL_CERT_DIR
    if config.ca_file:
        context.load_verify_locations(cafile=config.ca_file)
    return context


def certificate_refusal(error: aiohttp.ClientConnectorCertificateError) -> str:
    """One line: the host whose certificate failed and the check that failed it."""
    cause = error.certificate_error
    check = (getattr(cause, "verify_message", None) or str(cause)).rstrip(".")
    code = getattr(cause, "verify_code", None)
    return (f"the TLS certificate of {error.host}:{error.port} failed verification: {check}"
            f"{f' (X509 error {code})' if code else ''}; nothing was sent to it")
