"""A proxy's health: a score that successes raise and failures lower more, and rests.

Pure arithmetic, shared by the in-process book here and the Redis one
(:mod:`productcrawler.proxies.shared`, whose Lua script does the same steps):

* every proxy starts at ``SCORE_MAX``; a success adds ``PROXY_SCORE_SUCCESS``
  (up to ``SCORE_MAX``), a failure the proxy is to blame for takes away
  ``PROXY_SCORE_FAILURE``;
* when a failure takes the score below ``PROXY_SCORE_MIN`` the proxy *rests*:
  it gets no request for ``min(PROXY_REST_MAX, PROXY_REST_BASE * 2**(n-1))``
  seconds, half of it fixed and half random (equal jitter, as retries), ``n``
  being its rests in a row. It comes back at ``PROXY_SCORE_MIN``, so one more
  failure rests it again, twice as long; ``n`` starts over once its score is
  back to full;
* outcomes reported while a proxy rests (requests sent before the rest) are
  ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from productcrawler.config.sections import SCORE_MAX, HealthPolicy

__all__ = ["SCORE_MAX", "HealthPolicy", "ProxyHealth"]

@dataclass
class ProxyHealth:
    score: float = SCORE_MAX
    rest_until: float = 0.0  #: on the book's clock (local monotonic, or Redis server time)
    rests: int = 0

    def resting(self, now: float) -> bool:
        return now < self.rest_until

    def apply(self, policy: HealthPolicy, successes: int, failures: int, now: float,
              draw: float) -> float | None:
        """Count outcomes; the length of the rest this started, if any."""
        if self.resting(now):
            return None
        score = min(SCORE_MAX, self.score + successes * policy.success)
        score = max(0.0, score - failures * policy.failure)
        if score >= SCORE_MAX:
            self.rests = 0
        if failures and score < policy.minimum:
            self.rests += 1
            rest = policy.rest_seconds(self.rests, draw)
            self.rest_until = now + rest
            self.score = policy.minimum
            return rest
        self.score = score
        return None
