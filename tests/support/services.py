"""The services the tests reach: the real MariaDB and Redis of this machine, the local proxies'
credentials, and a crawl's database by its URL.

Each test gets a database and a Redis key prefix of its own (the ``mysql_url``
and ``redis_prefix`` fixtures of conftest.py); these read and write them.
"""

from __future__ import annotations

import os
from typing import Any

import pymysql

MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
#: The Redis every test uses (REDIS_TEST_URL points them all elsewhere: the start-up check and
#: the key clean-up included).
REDIS_URL = os.environ.get("REDIS_TEST_URL", "redis://127.0.0.1:6379/0")
#: The local proxies' credentials (simulator.proxies, the proxy_farm fixture): the crawl must
#: send them, they answer 407 otherwise.
PROXY_USER, PROXY_PASSWORD = "crawler", "pr0xy-s3cret"


def mysql_query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` in the MySQL database of ``url`` (a ``mysql_url``)."""
    connection = pymysql.connect(database=url.rsplit("/", 1)[1], **MYSQL)
    try:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        connection.close()


def database_query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` in the database of ``url``: a ``mysql_url``, ``postgresql_url`` or ``sqlite:///``."""
    if url.startswith("mysql"):
        return mysql_query(url, sql)
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as connection:
            return list(connection.execute(sql).fetchall())
    import sqlite3

    connection = sqlite3.connect(url[len("sqlite:///"):])
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def mysql_execute(url: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """Run ``sql`` once per row of parameters and commit."""
    connection = pymysql.connect(database=url.rsplit("/", 1)[1], **MYSQL)
    try:
        connection.cursor().executemany(sql, rows)
        connection.commit()
    finally:
        connection.close()


def table(mysql_url: str, name: str) -> list[tuple[Any, ...]]:
    """Every row of a table, every column, ordered by product_id: compare snapshots row for row."""
    return mysql_query(mysql_url, f"SELECT * FROM {name} ORDER BY product_id")


def stored_count(url: str) -> int:
    try:
        return mysql_query(url, "SELECT COUNT(*) FROM products")[0][0]
    except Exception:  # noqa: BLE001 - the table may not exist yet
        return 0


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` from a crawl's ``DATABASE_URL``: MySQL (mysql_url) or SQLite (sqlite:///path)."""
    if url.startswith("sqlite:///"):
        import sqlite3

        connection = sqlite3.connect(url[len("sqlite:///"):])
        try:
            return [tuple(row) for row in connection.execute(sql).fetchall()]
        finally:
            connection.close()
    return mysql_query(url, sql)


def redis_keys(client: Any, prefix: str) -> list[bytes]:
    """Every key under a test's prefix: the pass's keys are ``{prefix}:...`` (the cluster hash tag)."""
    return [key for pattern in (f"{prefix}:*", f"{{{prefix}}}:*") for key in client.scan_iter(pattern)]
