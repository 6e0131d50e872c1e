"""Storage: MySQL or SQLite behind one interface (``database.py``; the connection in ``target.py``).

A crawler's pipeline and pass ledger share one connection pool, ``crawl_database(crawler)``
(:mod:`.crawler`).
"""
