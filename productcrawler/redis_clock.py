"""Redis server time as local time: the offset between a script's ``TIME`` and ``time.monotonic()``.

The Lua scripts of the shared rate limit and of the proxies' shared health
run on the server's clock and answer its ``TIME``; a :class:`ServerClock`
per client turns the server times they return (a slot, the end of a rest)
into this process's monotonic time.
"""

from __future__ import annotations


class ServerClock:
    """Server time minus local time, from every call so far that read the server's clock."""

    def __init__(self) -> None:
        self.offset: float | None = None
        self._bounds: tuple[float, float] | None = None

    def observe(self, server_now: float, started: float, received: float) -> float:
        """The offset after a call sent at ``started`` whose reply, saying ``server_now``, came at ``received``.

        Each call bounds it: the server read its clock between ``started`` and
        ``received``. A single call's midpoint is off by up to half its round
        trip, and a slow reply (a busy event loop, a Redis stall) would shift
        the times of one call's answer against the next's; the intersection of
        all the bounds is as tight as the fastest call. When the bounds stop
        overlapping (a clock step, drift), it starts again from this call.
        """
        low, high = server_now - received, server_now - started
        if self._bounds is not None:
            best_low, best_high = self._bounds
            if max(low, best_low) <= min(high, best_high):
                low, high = max(low, best_low), min(high, best_high)
        self._bounds = (low, high)
        self.offset = (low + high) / 2
        return self.offset
