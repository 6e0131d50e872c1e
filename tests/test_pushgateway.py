"""PUSHGATEWAY_URL: every run pushes its pass summary to a real Pushgateway (Debian's prometheus-pushgateway).

The series are read back from the Pushgateway's own /metrics, as Prometheus
scrapes them; a Pushgateway that is away costs one WARNING and nothing else.
"""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.catalogue import present_ids
from tests.support.crawls import crawl_env, run_crawl
from tests.support.logs import log_lines
from tests.support.services import query

if TYPE_CHECKING:
    from simulator.process import SimulatorProcess

END = 300
FAST = {"MAX_REQUESTS_PER_SECOND": 2000}


def pushed(gateway: Any, ids: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The series of the group ``job=productcrawler, spider=products, ids=...``, without those labels."""
    series = {}
    for family in text_string_to_metric_families(gateway.metrics()):
        for sample in family.samples:
            labels = dict(sample.labels)
            if labels.pop("job", None) != "productcrawler" or labels.pop("ids", None) != ids:
                continue
            assert labels.pop("spider") == "products"
            labels.pop("instance", None)  # the Pushgateway's own empty instance label
            series[(sample.name, tuple(sorted(labels.items())))] = sample.value
    return series


def test_a_complete_pass_pushes_its_counts_coverage_exit_status_and_end_time(
        clean_simulator: SimulatorProcess, pushgateway: Any, tmp_path: Any) -> None:
    database = f"sqlite:///{tmp_path}/products.db"
    started = time.time()
    result = run_crawl("-a", f"end_id={END}", settings=FAST, env=crawl_env(
        API_BASE_URL=clean_simulator.base_url, DATABASE_URL=database, PUSHGATEWAY_URL=pushgateway.url))
    assert result.returncode == 0, result.stderr[-3000:]
    stored = len(present_ids(END))
    series = pushed(pushgateway, f"1-{END}")
    assert series[("productcrawler_run_exit_status", ())] == 0
    assert series[("productcrawler_run_products", (("outcome", "stored"),))] == stored
    assert series[("productcrawler_run_products", (("outcome", "missing"),))] == END - stored
    assert series[("productcrawler_run_products", (("outcome", "failed"),))] == 0
    assert started - 1 <= series[("productcrawler_run_end_time_seconds", ())] <= time.time()
    assert 0 < series[("productcrawler_run_duration_seconds", ())] < time.time() - started
    # The pass is complete: its summary, as crawl_passes holds it.
    [(pass_id, finished_at)] = query(database, "SELECT pass_id, finished_at FROM crawl_passes")
    assert series[("productcrawler_pass_id", (("pass", "last"),))] == pass_id
    assert series[("productcrawler_pass_products", (("outcome", "stored"), ("pass", "last")))] == stored
    assert series[("productcrawler_pass_products", (("outcome", "missing"), ("pass", "last")))] == END - stored
    assert series[("productcrawler_pass_coverage", (("column", "price"), ("pass", "last")))] == 1.0
    end_time = datetime.strptime(str(finished_at), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    assert series[("productcrawler_last_complete_pass_end_time_seconds", ())] == end_time
    assert started - 2 <= end_time <= time.time()
    assert not any(labels == (("pass", "previous"),) for _, labels in series)  # one pass so far
    assert "Pushed the run's summary to the Pushgateway" in result.stderr


def test_a_run_the_guard_stopped_pushes_exit_status_3_and_no_complete_pass(
        clean_simulator: SimulatorProcess, pushgateway: Any, tmp_path: Any) -> None:
    # A wrong path: every answer is a 404, and the guard stops the crawl.
    result = run_crawl("-a", "start_id=1001", "-a", "end_id=2000",
                       settings={**FAST, "GUARD_404_STREAK": 30}, env=crawl_env(
                           API_BASE_URL=clean_simulator.base_url.replace("/v1", "/v9"),
                           DATABASE_URL=f"sqlite:///{tmp_path}/products.db", PUSHGATEWAY_URL=pushgateway.url))
    assert result.returncode == 3, result.stderr[-3000:]
    series = pushed(pushgateway, "1001-2000")
    assert series[("productcrawler_run_exit_status", ())] == 3
    [(info, value)] = [(dict(labels), v) for (name, labels), v in series.items() if name == "productcrawler_run_info"]
    assert value == 1 and info["reason"] == "guard_404_streak"
    host, pid, token = info["process"].split(":")
    assert host == socket.gethostname() and pid.isdigit() and len(token) == 8
    assert series[("productcrawler_run_products", (("outcome", "stored"),))] == 0
    # Never complete: the stale-catalogue alert finds no end time (absent()).
    assert ("productcrawler_last_complete_pass_end_time_seconds", ()) not in series


def test_a_pushgateway_that_is_away_costs_one_warning_and_not_the_exit_code(
        clean_simulator: SimulatorProcess, tmp_path: Any) -> None:
    result = run_crawl("-a", "end_id=100", settings=FAST, env=crawl_env(
        API_BASE_URL=clean_simulator.base_url, DATABASE_URL=f"sqlite:///{tmp_path}/products.db",
        PUSHGATEWAY_URL="http://127.0.0.1:1"))
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = log_lines(result.stderr, "WARNING")
    assert len([line for line in warnings if "Pushgateway" in line]) == 1, warnings
    [warning] = [line for line in warnings if "Pushgateway" in line]
    assert "Could not push the run's summary to the Pushgateway at http://127.0.0.1:1" in warning
    assert "Connection refused" in warning
    assert "Traceback" not in result.stderr
