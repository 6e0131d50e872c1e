"""Which database errors mean "unreachable, try again" rather than "bad data"."""

from __future__ import annotations

import sqlite3

import psycopg
import pymysql

# pymysql's OperationalError also covers bad SQL-mode data; these client/server
# codes are the ones that mean the connection itself is the problem.
_MYSQL_CONNECTION_CODES = frozenset({
    1040,  # too many connections
    1053,  # server shutdown in progress
    1205,  # lock wait timeout
    1213,  # deadlock: the transaction was rolled back, try again
    2003,  # can't connect
    2006,  # server has gone away
    2013,  # lost connection during query
    2014, 2027, 2055,
})


def is_connection_error(error: BaseException) -> bool:
    if isinstance(error, pymysql.err.InterfaceError):
        return True
    if isinstance(error, pymysql.err.OperationalError):
        code = error.args[0] if error.args and isinstance(error.args[0], int) else None
        return code in _MYSQL_CONNECTION_CODES
    if isinstance(error, (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected,
                          psycopg.errors.LockNotAvailable, psycopg.errors.AdminShutdown,
                          psycopg.errors.TooManyConnections)):
        return True
    if isinstance(error, psycopg.OperationalError) and error.sqlstate is None:
        return True  # no SQLSTATE: the client's own error, the connection is lost or refused
    if isinstance(error, psycopg.InterfaceError):
        return True
    if isinstance(error, sqlite3.OperationalError):
        return "locked" in str(error) or "busy" in str(error)
    return isinstance(error, (ConnectionError, OSError, TimeoutError))


def is_deadlock(error: BaseException) -> bool:
    """The database rolled the transaction back to break a deadlock: running it again is safe."""
    if isinstance(error, pymysql.err.OperationalError):
        return bool(error.args) and error.args[0] == 1213
    return isinstance(error, psycopg.errors.DeadlockDetected)
