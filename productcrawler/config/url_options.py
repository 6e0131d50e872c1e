"""Query options of DATABASE_URL and REDIS_URL: which exist, their values, what is masked.

``mysql://u:p@db:3306/shop?ssl_ca=/etc/ssl/rds.pem`` must not connect without
TLS because nobody read ``ssl_ca``: every option is checked here, and one we do
not know is refused at start (``config/values.py`` turns ``ValueError`` into its
one-line configuration error). The names are the drivers' own (PyMySQL's
``connect()`` arguments, redis-py's URL options), so their documentation applies.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _bool(value: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError("is not a boolean (true/false)")


def _redis_bool(value: str) -> bool:
    # redis-py parses the URL's booleans itself and reads anything but 0/f/false/n/no
    # as true ("off" included): only spellings that mean the same to it are accepted.
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise ValueError("is not a boolean (true/false)")


def _file(value: str) -> str:
    if not value:
        raise ValueError("is empty; expected a file path")
    if not Path(value).is_file():
        raise ValueError("is not a readable file")
    return value


def _text(value: str) -> str:
    if not value:
        raise ValueError("is empty")
    return value


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError("is not a number") from None
    if not number > 0:
        raise ValueError("must be greater than 0")
    return number


def _seconds(value: str) -> int:
    """Whole seconds, 0 or more (redis-py's health_check_interval: 0 is off)."""
    try:
        number = int(value)
    except ValueError:
        raise ValueError("is not an integer") from None
    if number < 0:
        raise ValueError("must be 0 (off) or more")
    return number


def database_number(value: str) -> int:
    """A Redis database number (the URL's path or its ``db`` option): digits only, as redis-py would not check."""
    if not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number, 0 or more")
    return int(value)


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    return parse


#: PyMySQL ``connect()`` arguments accepted as DATABASE_URL query options.
MYSQL_OPTIONS: dict[str, Callable[[str], Any]] = {
    "ssl_ca": _file,  # CA bundle that signed the server's certificate; implies ssl_verify_cert=true
    "ssl_cert": _file,  # client certificate (servers that REQUIRE X509)
    "ssl_key": _file,  # its private key
    "ssl_key_password": _text,  # the key's passphrase
    "ssl_verify_cert": _bool,  # verify the server's certificate (system CAs unless ssl_ca)
    "ssl_verify_identity": _bool,  # also check the host name against the certificate
    "unix_socket": _text,  # connect through this socket instead of TCP
}

#: DATABASE_URL options for PostgreSQL: MySQL's names and meanings (storage/postgresql.py maps them to libpq's).
POSTGRESQL_OPTIONS = MYSQL_OPTIONS

#: redis-py URL options accepted in REDIS_URL (every client kind takes them,
#: the cluster ones included).
REDIS_OPTIONS: dict[str, Callable[[str], Any]] = {
    "ssl_ca_certs": _file,
    "ssl_certfile": _file,
    "ssl_keyfile": _file,
    "ssl_cert_reqs": _choice("required", "optional", "none"),
    "ssl_check_hostname": _redis_bool,
    "client_name": _text,
    "socket_timeout": _number,
    "socket_connect_timeout": _number,
    "health_check_interval": _seconds,
    "db": database_number,
}
#: REDIS_URL options that only mean something over TLS (rediss://).
REDIS_TLS_OPTIONS = frozenset(name for name in REDIS_OPTIONS if name.startswith("ssl_"))

#: Values shown as *** in every message: passwords, and where the private keys are.
SECRET_OPTIONS = frozenset({"password", "ssl_key", "ssl_key_password", "ssl_keyfile", "ssl_password"})


def raw_options(query: str) -> list[tuple[str, str]]:
    """``name=value`` pairs of a URL's query, percent-decoded, in order."""
    pairs = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((unquote(name), unquote(value)))
    return pairs


def parse_options(query: str, known: dict[str, Callable[[str], Any]]) -> dict[str, Any]:
    """Typed options of ``query``; ValueError naming the first unknown, repeated or bad one."""
    options: dict[str, Any] = {}
    for name, value in raw_options(query):
        if name not in known:
            raise ValueError(f"has an unknown option {name!r}; known options: {', '.join(known)}")
        if name in options:
            raise ValueError(f"gives option {name!r} twice")
        try:
            options[name] = known[name](value)
        except ValueError as error:
            shown = "***" if name in SECRET_OPTIONS else repr(value)
            raise ValueError(f"option {name}={shown} {error}") from None
    return options


#: Options whose values may be shown: the known ones that are not secret. An
#: unknown option (``passwd=``, a misspelt ``ssl_key_pass=``) may hold anything.
SHOWN_OPTIONS = frozenset(MYSQL_OPTIONS).union(REDIS_OPTIONS) - SECRET_OPTIONS


def secret_values(query: str) -> list[tuple[int, int]]:
    """Where in ``query`` the values of secret and unknown options are, as (start, end): what is masked."""
    spans, offset = [], 0
    for part in query.split("&"):
        name, sep, _ = part.partition("=")
        if sep and unquote(name) not in SHOWN_OPTIONS:
            spans.append((offset + len(name) + 1, offset + len(part)))
        offset += len(part) + 1
    return spans
