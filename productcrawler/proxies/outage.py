"""The proxies-down streak: every proxy failing on its own account, and nothing else, for too long.

A proxy's own failure (connection refused or not established, its host
unknown, a 407, a CONNECT it refused) is re-sent through another proxy without
using the id's retries, so it never becomes an id's outcome and the guard's
no-answer streak, which counts ids, never sees it: with every proxy down the
requests would wait for a rest to end, again and again, for ever. This streak
counts those failures instead; anything else through any proxy breaks it (an
answer, whatever its status, or a timeout or a cut connection, which the
no-answer streak follows). The proxy middleware asks :meth:`diagnosis` while
a request waits with every proxy resting, and stops the crawl through the
guard (exit 3, ``guard_proxies_down``) when it gets one:

* if no proxy answered in this run, at once (``PROXY_URLS`` names proxies
  that are not running, or not where it says);
* otherwise once the streak has lasted ``GUARD_NO_ANSWERS_SECONDS``, as the
  no-answer streak does after products: proxies restarting are ridden out.

``GUARD_NO_ANSWERS=0`` (the no-answer checks off) turns it off: the requests
wait for the proxies, as they do with ``GUARD_ENABLED`` off.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from productcrawler.config.proxy_urls import Proxy


class ProxyOutage:
    def __init__(self, proxies: Sequence[Proxy], *, enabled: bool, seconds: float,
                 clock: Callable[[], float] = monotonic) -> None:
        self.proxies = list(proxies)
        self.enabled = enabled
        self.seconds = seconds
        self.clock = clock
        self.length = 0  # the proxies' own failures in a row, with nothing through any proxy
        self.started_at = 0.0  # when the first of them came
        self.answers = 0  # through any proxy, in this run
        self._last: dict[int, str] = {}  # proxy index -> its last failure in the streak

    def failed(self, proxy: Proxy, reason: str) -> None:
        """One of ``proxy``'s own failures."""
        if not self.length:
            self.started_at = self.clock()
            self._last.clear()
        self.length += 1
        self._last[proxy.index] = reason

    def got_through(self, *, answer: bool) -> None:
        """Something went through a proxy (``answer``: an HTTP answer): the proxies are not down."""
        self.length = 0
        if answer:
            self.answers += 1

    def diagnosis(self) -> str | None:
        """What the ERROR line says if the crawl must stop now (every proxy rests), else ``None``."""
        if not self.enabled or not self.length:
            return None
        lasted = self.clock() - self.started_at
        if self.answers and lasted < self.seconds:
            return None
        lasts = ", ".join(f"{p.shown}: {self._last.get(p.index, 'rested by another instance')}"
                          for p in self.proxies)
        seen = (f"the proxies stopped carrying requests {lasted:.0f} s ago, after {self.answers} answers "
                f"through them in this run" if self.answers else "no proxy carried a single request")
        return (f"{seen}: every proxy ({len(self.proxies)}) rests after failures of its own, "
                f"{self.length} in a row with no answer through any proxy (last failure of each: {lasts}); "
                "check that the proxies of PROXY_URLS are running, reachable from here and willing to carry "
                "this crawl (a refused tunnel, tunnel_4xx, is the proxy's own refusal)")
