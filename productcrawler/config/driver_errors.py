"""One line for a database or Redis driver's error about a configured URL, with no piece of its password.

Used by the start-up checks (``commands/preflight.py``), ``scrapy progress`` and
the shared rate limit's ping: each names the URL masked, then this line.
"""

from __future__ import annotations

import ssl

from productcrawler.config.values import password_hint


def describe(error: BaseException, url: str, *, tls_option: str) -> str:
    """One line for a driver error about ``url``; a failed TLS handshake says so and names the option to check.

    When ``url``'s password reads as its host, port or database (an unencoded
    ``/?#`` and ``@``: :func:`password_hint`), the driver's message is left out:
    it names what the driver was given, pieces of the password. The error's
    class and code remain, and the hint ends the line.
    """
    tls = _tls_error(error)
    code = error.args[0] if len(error.args) == 2 and isinstance(error.args[0], int) else None  # pymysql
    hint = password_hint(url)
    if hint:
        kind = "TLS handshake failed" if tls is not None else type(error).__name__
        return (f"{kind}{'' if code is None else f' (error {code})'} (the driver's message is not shown: "
                f"the host, port or database it names may be pieces of the password){hint}")
    if tls is not None:
        return f"TLS handshake failed: {tls} (check {tls_option})"
    if code is not None:
        return f"{error.args[1]} (error {code})"
    return str(error) or type(error).__name__


def _tls_error(error: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = error
    for _ in range(5):  # drivers wrap the ssl error once or twice
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
