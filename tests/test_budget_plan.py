"""The pace an announced budget allows (Plan, BudgetReader), on a clock of our own: the rules a user notices.

Each test drives the arithmetic with explicit times, no sleeps: a fixed window
spent before its reset and never beyond, a new window opening with its quota,
the requests in flight counted, stale and late reports ignored, and a
leaky bucket kept below its size by the leak rate measured from the answers.
The last tests build the middleware from settings and hand it 429s.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import random
from typing import Any

import pytest
from scrapy.http import Request, Response
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from productcrawler import stat_keys
from productcrawler.budget.headers import BudgetHeaders, LeakyBudget, WindowBudget
from productcrawler.budget.middleware import BudgetGateMiddleware
from productcrawler.budget.plan import Plan
from productcrawler.budget.reader import SKEW, BudgetReader, LeakyReport, WindowReport
from productcrawler.ratelimit.middleware import RateLimitMiddleware
from tests.support.doubles import engine_with
from tests.support.imitations.budgets import LeakyBucket

CAP = 500.0


class CaseSensitiveHeaders(dict[str, str]):
    """What BudgetHeaders reads (``get(name)``), spelt as it asks."""


def window(seq: int | None, observed_at: float, remaining: int, reset_at: float, *,
           quota: int | None = 100, length: float | None = 1.0) -> WindowReport:
    return WindowReport(seq, observed_at, remaining, reset_at, reset_at - 0.001, quota, length)


def send_until(plan: Plan, until: float, start: float = 0.0) -> list[float]:
    """A sender that goes as soon as the plan allows: the times of the requests let through up to ``until``."""
    times, now = [], start
    while len(times) < 10_000:  # a plan that lets through without end fails, not hangs
        seq, at = plan.claim(now)
        assert at >= now  # never earlier than asked
        if at > until:
            return times
        if seq is not None:  # else: ask again at ``at``
            times.append(at)
        now = at
    return times


def test_the_remaining_budget_is_spread_up_to_the_reset_and_never_overspent() -> None:
    plan = Plan()
    plan.claim(0.0)  # the request whose answer says 50 are left, 0.8 s to the reset
    assert plan.accept(window(1, 0.0, 50, 0.8), 0.0)
    before_reset = send_until(plan, 0.8)
    # 50 left, less the margin of 2 % of the quota: 48 may go before the reset, and they do.
    assert len(before_reset) == 48
    gaps = [b - a for a, b in zip(before_reset, before_reset[1:], strict=False)]
    assert max(gaps) - min(gaps) < 1e-9  # evenly, not in a burst
    assert before_reset[-1] <= 0.8


def test_a_new_window_opens_at_the_reset_with_its_whole_quota() -> None:
    plan = Plan()
    plan.claim(0.0)
    plan.accept(window(1, 0.0, 0, 0.5), 0.0)  # spent: nothing left until 0.5 s
    times = send_until(plan, 2.5)
    assert times[0] >= 0.5
    for start in (0.5, 1.5):  # each later window: its quota less the margin, spread over it
        count = sum(start <= t < start + 1.0 for t in times)
        assert 90 <= count <= 98, (start, count)


def test_after_the_reset_an_unknown_quota_waits_for_the_next_answer_not_for_ever() -> None:
    plan = Plan()
    plan.claim(0.0)
    plan.accept(window(1, 0.0, 0, 0.5, quota=None, length=None), 0.0)
    _seq, at = plan.claim(0.1)
    assert 0.5 <= at < 0.51
    assert plan.report is None  # the gate is open until an answer tells the new budget
    assert plan.claim(0.6)[1] == 0.6


@pytest.mark.parametrize("reported_seq", [1, 10])
def test_requests_in_flight_count_against_what_is_left(reported_seq: int) -> None:
    plan = Plan()
    for _ in range(10):  # ten requests sent; the answer is to the first (or the tenth)
        plan.claim(0.0)
    plan.accept(window(reported_seq, 0.0, 10, 1.0, quota=None, length=None), 0.0)
    before_reset = send_until(plan, 1.0)
    # 10 left less a margin of 1; the nine sent after the answered one spend nine of them.
    assert len(before_reset) == 9 - (10 - reported_seq)


def test_a_report_older_than_its_window_is_ignored() -> None:
    plan = Plan()
    plan.claim(0.0)
    assert not plan.accept(window(1, 0.0, 5, 1.0), 1.5)
    assert plan.report is None
    assert plan.accept(window(1, 0.0, 5, 1.0), 0.9)


def test_a_report_of_an_earlier_request_does_not_replace_a_newer_one() -> None:
    plan = Plan()
    for _ in range(5):
        plan.claim(0.0)
    assert plan.accept(window(5, 0.01, 3, 1.0), 0.02)
    assert not plan.accept(window(3, 0.02, 90, 1.0), 0.02)  # arrived later, sent earlier
    assert plan.report is not None and plan.report.remaining == 3


def test_the_pace_shown_never_exceeds_the_cap() -> None:
    rnd = random.Random(7)
    for _ in range(500):
        plan = Plan()
        plan.claim(0.0)
        if rnd.random() < 0.5:
            plan.accept(window(1, 0.0, rnd.randrange(0, 100_000), rnd.uniform(0.001, 60), quota=None), 0.0)
        else:
            plan.accept(LeakyReport(1, 0.0, rnd.randrange(0, 40), 40, rnd.choice([None, 1.0, 1e6])), 0.0)
        budget = plan.budget(rnd.uniform(0.0, 0.5), CAP)
        assert budget is not None and 0 <= budget.pace <= CAP


def crawl_leaky(seconds: float, latency: float = 0.002) -> tuple[int, int, LeakyReport | None]:
    """One sender, a plan and a reader against a bucket of 40 leaking 200/s; (sent, rejected, last report)."""
    api, plan, reader = LeakyBucket(40, 200.0), Plan(), BudgetReader()
    api.at = 0.0  # our simulated clock, not the wall clock
    answers: list[tuple[float, int, int]] = []  # (arrival here, seq, level)
    sent = rejected = 0
    now = 0.0
    while now < seconds and sent < 10 * (40 + 200 * seconds):  # without end: fail, not hang
        if plan.report is None and answers:  # no budget known: the probe's answer first (BudgetPacer's rule)
            now = max(now, answers[0][0])
        while answers and answers[0][0] <= now:
            at, seq, level = heapq.heappop(answers)
            report = reader.read(LeakyBudget("shopify", level, 40), seq, at, at)
            if report is not None:
                plan.accept(report, at)
        seq, at = plan.claim(now)  # waits until ``at`` whatever comes meanwhile, as the gate does
        if seq is None:  # asks again at ``at``
            now = at
            continue
        allowed, level = api.hit(at + latency)
        sent += 1
        rejected += not allowed
        heapq.heappush(answers, (at + 2 * latency, seq, level))
        now = at
    return sent, rejected, plan.report if isinstance(plan.report, LeakyReport) else None


def test_a_leaky_bucket_is_kept_below_its_size_at_the_measured_leak_rate() -> None:
    sent, rejected, report = crawl_leaky(5.0)
    assert rejected == 0
    # 40 at the start, then 97 % of 200/s: about 1,010 in 5 s.
    assert sent >= 0.9 * (40 + 200 * 5), sent
    assert report is not None and report.leak is not None and 180 <= report.leak <= 220, report


def test_the_leak_rate_is_measured_from_successive_answers() -> None:
    reader = BudgetReader()
    report = None
    for i in range(750):  # one request every 4 ms for 3 s and the level stays put: 250 a second leak
        report = reader.read(LeakyBudget("shopify", 20, 40), i + 1, i * 0.004, 0.0)
        # Never above the true leak (that would overfill the bucket), whatever the baseline so far.
        assert report.leak is None or report.leak <= 250
    assert report is not None and report.leak is not None and report.leak >= 0.95 * 250


def test_epoch_resets_teach_the_window_length_and_narrow_the_reset() -> None:
    reader = BudgetReader()
    wall = 1_796_161_600.3  # the API's window resets at .0 of each second; we do not know it yet
    report = None
    counts: dict[int, int] = {}
    for i in range(300):  # one answer every 5 ms for 1.5 s
        t = i * 0.005
        reset_epoch = math.floor(wall + t) + 1
        counts[reset_epoch] = counts.get(reset_epoch, 0) + 1
        remaining = 200 - counts[reset_epoch]
        budget = WindowBudget("x-ratelimit", remaining, reset_epoch - (wall + t), 1.0, quota=200, epoch=True)
        report = reader.read(budget, i + 1, t, wall + t)
    assert report is not None and report.window == 1.0
    # The true reset, 0.7 s and 1.7 s after the start, lies within the bounds, which are well under 1 s wide.
    assert report.reset_from is not None and report.reset_from <= 1.7 + 0.06 and report.reset_at >= 1.7 - 1e-6
    assert report.reset_at - report.reset_from < 0.1


def build(**settings: Any) -> RateLimitMiddleware:
    values = {"MAX_REQUESTS_PER_SECOND": 100, "RATE_LIMIT_BURST": 1,
              "DOWNLOAD_HANDLERS": get_project_settings().getdict("DOWNLOAD_HANDLERS"), **settings}
    crawler = get_crawler(settings_dict=values)
    middleware = RateLimitMiddleware.from_crawler(crawler)
    engine_with(crawler, BudgetGateMiddleware.from_crawler(crawler), middleware)  # found at the first answer
    return middleware


def test_a_429_with_budget_headers_sets_the_pace_instead_of_halving_the_rate() -> None:
    mw = build()

    async def main() -> None:
        request = Request("http://api.test/product/1")
        await mw.wait_for_slot(request)
        headers = {"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "30"}
        await mw.process_response(request, Response(request.url, status=429, headers=headers))

    asyncio.run(main())
    assert mw.rate_factor == 1.0 and mw.backoffs == 0
    assert mw.crawler.stats.get_value(stat_keys.BUDGET_429) == 1
    budget = mw.budget.budget() if mw.budget is not None else None
    assert budget is not None and budget.remaining == 0 and budget.pace == 0


def test_a_429_without_budget_headers_still_halves_the_rate() -> None:
    mw = build()

    async def main() -> None:
        request = Request("http://api.test/product/1")
        await mw.wait_for_slot(request)
        await mw.process_response(request, Response(request.url, status=429))

    asyncio.run(main())
    assert mw.rate_factor == pytest.approx(0.5, abs=0.01) and mw.backoffs == 1
    assert mw.crawler.stats.get_value(stat_keys.BUDGET_429) is None


WALL = 1_796_161_600.0
ABSURD_RESETS = ["900000000", "2796161600", "2796161600000"]  # delta s, epoch s, epoch ms: 10^9 s away


def clamped(reader: BudgetReader, seq: int, at: float, remaining: int, reset: str = "900000000",
            max_wait: float = 300.0) -> WindowReport:
    """The report of an answer at ``at`` saying ``remaining`` of 200 are left until an absurd ``reset``."""
    budget = BudgetHeaders(("x-ratelimit",), max_wait=max_wait).parse(
        CaseSensitiveHeaders({"X-RateLimit-Limit": "200", "X-RateLimit-Remaining": str(remaining),
                              "X-RateLimit-Reset": reset}), WALL + at)
    assert isinstance(budget, WindowBudget)
    report = reader.read(budget, seq, at, WALL + at)
    assert isinstance(report, WindowReport) and report.clamped
    return report


@pytest.mark.parametrize("reset", ABSURD_RESETS)
def test_under_a_clamped_reset_what_is_left_goes_at_the_cap_not_spread_over_the_clamp(reset: str) -> None:
    plan = Plan(CAP)
    plan.claim(0.0)
    assert plan.accept(clamped(BudgetReader(), 1, 0.0, 199, reset), 0.0)
    budget = plan.budget(0.0, CAP)
    assert budget is not None and budget.pace == CAP  # not 199 over 300 s
    times = send_until(plan, 1.0)
    # 199 left less the margin (2 % of the quota, and SKEW for requests that reach the API out of order).
    assert len(times) == 199 - 4 - SKEW
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert max(gaps) == pytest.approx(1 / CAP) and min(gaps) == pytest.approx(1 / CAP)  # at the cap, no faster
    budget = plan.budget(times[-1], CAP)
    assert budget is not None and budget.pace == 0 and budget.remaining == 0


def test_a_spent_window_under_a_clamped_reset_is_probed_at_doubling_intervals() -> None:
    # What one broken answer said, in every answer: nothing left, reset 10^9 s away (clamped to 300 s).
    plan, reader = Plan(CAP), BudgetReader()
    plan.claim(0.0)
    plan.accept(clamped(reader, 1, 0.0, 0), 0.0)
    probes, now = [], 0.0
    while now < 1200:
        seq, at = plan.claim(now)
        if seq is not None:  # a probe; its answer, 10 ms later, says nothing is left again
            probes.append(at)
            plan.accept(clamped(reader, seq, at + 0.01, 0), at + 0.01)
        now = at
    # One probe after a second, each wait twice the one before, never beyond the clamped reset: about
    # log2(300) probes in the first 300 s, then one per 300 s, not a stream.
    gaps = [round(b - a, 6) for a, b in zip([0.0, *probes], probes, strict=False)]
    assert gaps == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300], gaps


def test_a_probes_answer_telling_of_room_resumes_the_crawl_at_the_cap() -> None:
    plan, reader = Plan(CAP), BudgetReader()
    plan.claim(0.0)
    plan.accept(clamped(reader, 1, 0.0, 30), 0.0)
    spent = send_until(plan, 0.5)
    assert len(spent) == 30 - 4 - SKEW
    seq, probe = plan.claim(spent[-1])
    assert seq is None and probe == pytest.approx(spent[-1] + 1.0)  # asks again at the probe's time
    seq, at = plan.claim(probe)
    assert seq is not None and at == probe
    plan.accept(clamped(reader, seq, probe + 0.01, 199), probe + 0.01)  # a new window
    resumed = send_until(plan, probe + 1.0, start=probe + 0.01)
    assert len(resumed) == 199 - 4 - SKEW
    assert resumed[-1] - resumed[0] == pytest.approx((len(resumed) - 1) / CAP)
    # Spent again: the next probe is a second after the last request, the doubling started afresh.
    _seq, again = plan.claim(resumed[-1])
    assert again == pytest.approx(resumed[-1] + 1.0)


@pytest.mark.parametrize("reset", ABSURD_RESETS)
def test_an_absurd_reset_is_probed_no_longer_than_the_longest_wait_then_forgotten(reset: str) -> None:
    plan = Plan(CAP)
    plan.claim(0.0)
    assert plan.accept(clamped(BudgetReader(), 1, 0.0, 0, reset, max_wait=5.0), 0.0)
    # No answer to the probes (lost): one after a second, the next two seconds later, then the clamped reset.
    times = send_until(plan, 5.1, start=0.1)
    assert times[:3] == pytest.approx([1.0, 3.0, 5.005])
    # That window's end says nothing of the next one: no budget is known until an answer tells it
    # (the requests are probes again), rather than a window of 5 s assumed from the clamp.
    assert plan.report is None
