"""Which answers say "over the rate limit" (a 429, or a 403 that says so), and when its budget is reset.

The answers are the vendors' documented ones: GitHub's primary limit spent
(403, ``x-ratelimit-remaining: 0`` and the reset in epoch seconds) and its
403 for a token that may not read (the budget not spent), Best Buy's gateway
over its per-second quota (HTML) and its daily one (JSON), both without budget
headers, and Best Buy's refused key; Mashery's ``X-Mashery-Error-Code`` for a
key over its per-second or daily limit, and for one refused.
"""

from __future__ import annotations

import json
import time

import pytest
from scrapy.http import Response

from productcrawler.budget.limited import is_rate_limited, reset_after

GITHUB_EXCEEDED = {"message": "API rate limit exceeded for user ID 1.",
                   "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}
GITHUB_FORBIDDEN = {"message": "Resource not accessible by integration",
                    "documentation_url": "https://docs.github.com/rest"}
BESTBUY_PER_SECOND = b"<h1>Over Quota</h1>"
BESTBUY_PER_DAY = {"errorCode": "403", "errorMessage": "Over Quota"}
BESTBUY_BAD_KEY = {"errorCode": "403", "errorMessage": "The provided API Key is invalid."}


def answer(status: int, body: bytes | dict[str, str] = b"", **headers: str) -> Response:
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return Response("https://api.example.com/products?page=2", status=status, body=body,
                    headers={name.replace("_", "-"): value for name, value in headers.items()})


def github(status: int, body: dict[str, str], remaining: int, reset_in: int) -> Response:
    return answer(status, body, x_ratelimit_limit="5000", x_ratelimit_remaining=str(remaining),
                  x_ratelimit_used=str(5000 - remaining), x_ratelimit_reset=str(int(time.time()) + reset_in),
                  x_ratelimit_resource="core")


@pytest.mark.parametrize(("response", "limited"), [
    (github(403, GITHUB_EXCEEDED, remaining=0, reset_in=42), True),
    (answer(403, b"{}", RateLimit='"default";r=0;t=30', RateLimit_Policy='"default";q=100;w=60'), True),
    (answer(403, b"", X_Shopify_Shop_Api_Call_Limit="40/40"), True),
    (answer(403, BESTBUY_PER_SECOND), True),
    (answer(403, BESTBUY_PER_DAY), True),
    (answer(403, b"<h1>Developer Over Qps</h1>", X_Mashery_Error_Code="ERR_403_DEVELOPER_OVER_QPS",
            Retry_After="1"), True),
    (answer(403, b"<h1>Developer Over Rate</h1>", X_Mashery_Error_Code="ERR_403_DEVELOPER_OVER_RATE"), True),
    (answer(403, b"<h1>Developer Over Qps</h1>"), True),
    (answer(429), True),
    # A 403 that says nothing of a spent limit is a refused key.
    (github(403, GITHUB_FORBIDDEN, remaining=4321, reset_in=42), False),
    (answer(403, BESTBUY_BAD_KEY), False),
    (answer(403, b"<h1>Forbidden</h1>"), False),
    (answer(403, b"<h1>Developer Inactive</h1>", X_Mashery_Error_Code="ERR_403_DEVELOPER_INACTIVE"), False),
    # The gateway's code decides over its body's words.
    (answer(403, b"<h1>Not Authorized</h1> (too many requests with a bad key)",
            X_Mashery_Error_Code="ERR_403_NOT_AUTHORIZED"), False),
    (answer(403, b" " * 1024 + b"Over Quota"), False),  # only the body's first KB is read
    # Only a 403 or 429 may say it: a 401 with the unauthenticated budget spent is still a refused key.
    (answer(401, b"Requires authentication", x_ratelimit_remaining="0", x_ratelimit_reset="60"), False),
    (answer(503, BESTBUY_PER_DAY), False),
])
def test_a_403_is_a_rate_limit_only_when_its_headers_or_body_say_the_limit_is_spent(response, limited):
    assert is_rate_limited(response) is limited


def test_the_wait_of_a_403_over_the_limit_is_until_the_reset_its_headers_announce():
    assert reset_after(github(403, GITHUB_EXCEEDED, remaining=0, reset_in=42)) == pytest.approx(42, abs=1)
    assert reset_after(answer(403, b"{}", RateLimit='"default";r=0;t=30')) == 30
    # Best Buy's 403s announce no reset: the retry's backoff decides the wait.
    assert reset_after(answer(403, BESTBUY_PER_SECOND)) is None
    assert reset_after(answer(403, BESTBUY_PER_DAY)) is None
    # A leaky bucket leaks at a rate it does not announce: no reset either.
    assert reset_after(answer(403, b"", X_Shopify_Shop_Api_Call_Limit="40/40")) is None
