"""Where ``DATABASE_URL`` points and how to talk to it: ``connect()`` arguments and the SQL dialect.

:class:`DatabaseTarget` turns the (already validated) URL into a DB-API
module's ``connect()`` arguments, TLS options included; :class:`Dialect` holds
what differs between MySQL, SQLite and PostgreSQL in the statements and values
the crawl sends (the upserts are compiled by SQLAlchemy: ``statements.py``).
The SQL the crawl runs is in ``database.py``.
"""

from __future__ import annotations

import sqlite3
import ssl
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from productcrawler.config import ConfigError, mask_url, password_hint
from productcrawler.config.url_options import MYSQL_OPTIONS, parse_options
from productcrawler.storage.postgresql import postgresql_kwargs
from productcrawler.storage.schema import FAILURE_COLUMNS, PASS_COLUMN
from productcrawler.storage.statements import insert_ignore, upsert


@dataclass(frozen=True)
class Dialect:
    name: str
    module: str
    upsert_failure: str
    placeholder: str

    def upsert(self, table: str, columns: tuple[str, ...], key: str | tuple[str, ...],
               kept: tuple[str, ...] = ()) -> str:
        """INSERT of ``columns``; an existing ``key`` takes the new values but ``kept``'s."""
        return upsert(self.name, table, columns, key, kept)

    def insert_ignore(self, table: str, columns: tuple[str, ...]) -> str:
        """INSERT of ``columns`` that leaves an existing row as it is."""
        return insert_ignore(self.name, table, columns)

    def inserted_id(self, cursor: Any, statement: str, params: Any, key: str) -> int:
        """Run the INSERT ``statement``; the new row's ``key`` (an auto-increment)."""
        if self.name == "postgresql":
            cursor.execute(f"{statement} RETURNING {key}", params)
            return int(cursor.fetchone()[0])
        cursor.execute(statement, params)
        return int(cursor.lastrowid)

    def params(self, count: int) -> str:
        return ", ".join([self.placeholder] * count)

    def value(self, value: Any) -> Any:
        """A query parameter as this database's driver takes it."""
        return _sqlite_value(value) if self.name == "sqlite" else value

    def rows(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Rows of query parameters (``executemany``) as this database's driver takes them."""
        if self.name != "sqlite":
            return rows
        return [tuple(_sqlite_value(v) for v in row) for row in rows]


def _dialect(name: str, module: str, placeholder: str) -> Dialect:
    return Dialect(name=name, module=module, placeholder=placeholder,
                   upsert_failure=upsert(name, "crawl_failures", (*FAILURE_COLUMNS, PASS_COLUMN), "product_id"))


MYSQL = _dialect("mysql", "pymysql", "%s")
SQLITE = _dialect("sqlite", "sqlite3", "?")
POSTGRESQL = _dialect("postgresql", "psycopg", "%s")


@dataclass(frozen=True)
class DatabaseTarget:
    """Where DATABASE_URL points, as connect() arguments for its DB-API module."""

    dialect: Dialect
    connect_kwargs: dict[str, Any]
    shown_url: str  # password masked

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: float = 5.0) -> DatabaseTarget:
        shown = mask_url(url) or ""
        parts = urlsplit(url)
        if parts.scheme == "sqlite":
            path = Path(unquote(url[len("sqlite:///"):]))
            return cls(SQLITE, {"database": str(path), "check_same_thread": False,
                                "timeout": 30.0}, shown)
        if parts.scheme in ("mysql", "mysql+pymysql"):
            try:
                port, options = parts.port or 3306, _mysql_options(parts.query)
            except ValueError:
                # Validated URLs do not get here; urlsplit's own message would quote the port,
                # which may be a piece of the password.
                raise ConfigError(f"DATABASE_URL={shown!r} cannot be read{password_hint(url)}") from None
            kwargs = {
                "host": parts.hostname, "port": port,
                "user": unquote(parts.username or "root"), "password": unquote(parts.password or ""),
                "database": unquote(parts.path.strip("/")), "charset": "utf8mb4", "autocommit": False,
                "connect_timeout": max(1, int(connect_timeout)), "read_timeout": 60, "write_timeout": 60,
                **options,
            }
            return cls(MYSQL, kwargs, shown)
        if parts.scheme in ("postgresql", "postgres", "postgresql+psycopg"):
            return cls(POSTGRESQL, postgresql_kwargs(url, shown, connect_timeout), shown)
        raise ConfigError(f"DATABASE_URL={shown!r} has an unknown scheme{password_hint(url)}")

    def __repr__(self) -> str:  # never the password (connect_kwargs holds it, and TLS key passphrases)
        return f"DatabaseTarget({self.shown_url})"

    def connect(self) -> Any:
        """A plain DB-API connection (start-up checks, tools, tests)."""
        if self.dialect is SQLITE:
            Path(self.connect_kwargs["database"]).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(**self.connect_kwargs)
            sqlite_prepare(conn)
            return conn
        if self.dialect is POSTGRESQL:
            import psycopg

            return psycopg.connect(**self.connect_kwargs)
        import pymysql

        return pymysql.connect(**self.connect_kwargs)


def _mysql_options(query: str) -> dict[str, Any]:
    """DATABASE_URL's query options as PyMySQL ``connect()`` arguments (validated in config).

    Any ``ssl_*`` option asks for TLS, and TLS is then verified: the chain
    (against ``ssl_ca``, else the system's CAs) and the host name, each unless
    its option says ``false``. PyMySQL alone checks the host name only when
    asked and never without a CA file, and checks no chain without ``ssl_ca``
    or ``ssl_verify_cert``: one context of ours says what the URL means.
    """
    options = parse_options(query, MYSQL_OPTIONS)
    if not any(name.startswith("ssl_") for name in options):
        return options
    return {**{k: v for k, v in options.items() if not k.startswith("ssl_")}, "ssl": _tls_context(options)}


def _tls_context(options: dict[str, Any]) -> ssl.SSLContext:
    identity = options.get("ssl_verify_identity", options.get("ssl_verify_cert", True))
    chain = options.get("ssl_verify_cert", True) or identity  # a name is only worth checking on a verified chain
    try:
        context = ssl.create_default_context(cafile=options.get("ssl_ca"))  # the system's CAs without ssl_ca
    except (OSError, ValueError) as error:
        raise ConfigError(f"DATABASE_URL option ssl_ca={options['ssl_ca']!r}: cannot load it ({error})") from None
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT  # as PyMySQL: MySQL's own certificates fail it
    context.check_hostname = identity
    context.verify_mode = ssl.CERT_REQUIRED if chain else ssl.CERT_NONE
    if "ssl_cert" in options:
        try:
            context.load_cert_chain(options["ssl_cert"], options.get("ssl_key"), options.get("ssl_key_password"))
        except (OSError, ValueError) as error:  # ssl.SSLError is an OSError: a wrong key or passphrase
            raise ConfigError(f"DATABASE_URL options ssl_cert={options['ssl_cert']!r}, ssl_key=***: "
                              f"cannot load the client certificate ({error})") from None
    return context


def sqlite_prepare(conn: sqlite3.Connection) -> None:
    # WAL lets `scrapy progress` and users read while the crawl writes.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")


def _sqlite_value(value: Any) -> Any:
    # sqlite3 has no Decimal or datetime adapters worth relying on (the
    # datetime one is deprecated); store exact text.
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if value is not None and not isinstance(value, (int, str, float, bytes)):
        return str(value)
    return value
