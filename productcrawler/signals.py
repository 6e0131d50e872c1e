"""Signals of this project, sent through ``crawler.signals``."""

from __future__ import annotations

#: A batch of outcomes is committed to the database.
#: Arguments: ``products`` (list of ProductItem), ``failures`` (list of FailureItem).
#: Only now may an id count as done: ledgers acknowledge on this signal.
outcomes_committed = object()

#: A 200 whose body is not a product (sent by the spider, on that path only).
#: Arguments: ``request``, ``error`` (``payload.BadResponse``: ``reason``, ``detail``, ``keys``).
bad_response = object()
