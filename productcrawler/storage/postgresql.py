"""``DATABASE_URL=postgresql://…`` as psycopg ``connect()`` arguments.

The query options are MySQL's (``config/url_options.py``), with the same
meaning, spelled as libpq's: ``ssl_ca`` → ``sslrootcert`` and verification of
the chain and the host name (``sslmode=verify-full``), as for MySQL;
``ssl_verify_identity=false`` → the chain only (``verify-ca``);
``ssl_verify_cert`` without a CA → the system's CAs
(``sslrootcert=system``), ``ssl_cert``/``ssl_key``/``ssl_key_password`` → the
client certificate, ``unix_socket`` → the socket's directory as the host.
Without TLS options libpq's default applies (``prefer``: TLS when offered).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from productcrawler.config import ConfigError, password_hint
from productcrawler.config.url_options import POSTGRESQL_OPTIONS, parse_options


def postgresql_kwargs(url: str, shown: str, connect_timeout: float) -> dict[str, Any]:
    parts = urlsplit(url)
    try:
        port, options = parts.port or 5432, parse_options(parts.query, POSTGRESQL_OPTIONS)
    except ValueError:
        raise ConfigError(f"DATABASE_URL={shown!r} cannot be read{password_hint(url)}") from None
    kwargs: dict[str, Any] = {
        "host": parts.hostname, "port": port, "user": unquote(parts.username or "postgres"),
        "password": unquote(parts.password or ""), "dbname": unquote(parts.path.strip("/")),
        "connect_timeout": max(1, int(connect_timeout)), "autocommit": False,
        "application_name": "productcrawler",
        # psycopg prepares a statement run often; a generic plan made while a table was small (a
        # sequential scan) would be kept after it grew: each execution is planned for its own values.
        "options": "-c plan_cache_mode=force_custom_plan",
    }
    if "unix_socket" in options:
        kwargs["host"] = os.path.dirname(options["unix_socket"]) or options["unix_socket"]
    verify = options.get("ssl_verify_cert", "ssl_ca" in options) or options.get("ssl_verify_identity", False)
    if verify:
        kwargs["sslmode"] = "verify-full" if options.get("ssl_verify_identity", True) else "verify-ca"
        kwargs["sslrootcert"] = options.get("ssl_ca", "system")
    elif "ssl_ca" in options or "ssl_cert" in options:
        kwargs["sslmode"] = "require"
    for option, name in (("ssl_cert", "sslcert"), ("ssl_key", "sslkey"), ("ssl_key_password", "sslpassword")):
        if option in options:
            kwargs[name] = options[option]
    return kwargs
