"""A deadlock is the one database error after which a shared pass's row is asked for again."""

from __future__ import annotations

import psycopg
import pymysql

from productcrawler.storage.errors import is_deadlock


def test_a_deadlock_is_told_from_other_database_errors():
    assert is_deadlock(pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"))
    assert is_deadlock(psycopg.errors.DeadlockDetected("deadlock detected"))
    assert not is_deadlock(pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"))
    assert not is_deadlock(pymysql.err.OperationalError(2003, "Can't connect"))
    assert not is_deadlock(ValueError("1213"))
