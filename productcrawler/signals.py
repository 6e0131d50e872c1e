"""Signals of this project, sent through ``crawler.signals``."""

from __future__ import annotations

#: A batch of outcomes is committed to the database.
#: Arguments: ``products`` (list of ProductItem), ``failures`` (list of FailureItem), ``pages``
#: (list of PageItem: listing pages, their products among ``products``).
#: Only now may an id count as done: ledgers acknowledge on this signal.
outcomes_committed = object()

#: A 200 whose body is not a product (sent by the spider, on that path only).
#: Arguments: ``request``, ``error`` (``payload.BadResponse``: ``reason``, ``detail``, ``keys``).
bad_response = object()

#: An id given up with no HTTP answer at all: a download error once its retries
#: are used up, or an error that is not retried (sent by the spider's errback),
#: or with a 502/504 through a proxy, the proxy's word that the API did not
#: answer (``error``: a ``proxies.ProxyGatewayError``).
#: Arguments: ``request``, ``error`` (the exception).
no_answer = object()
