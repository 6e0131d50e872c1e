"""The monitoring that ships with the stack: alert rules, dashboard, and what a live crawl exposes.

promtool (Debian's ``prometheus`` package; ``make test`` installs it) checks the
rule file, runs its unit tests and parses every dashboard query. A real crawl
at 500/s against the simulator, with MySQL and Redis, is scraped while it runs
and while its endpoint lingers after the end: every metric name the dashboard
and the rules use must be among its samples, and its latency histogram must
count exactly the responses the simulator sent.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import time
import urllib.request
import uuid
from typing import TYPE_CHECKING, Any

import pymysql
import pytest
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from simulator import catalog
from tests.support.crawls import ROOT, LoggedCrawl, crawl_command, crawl_env
from tests.support.services import MYSQL, REDIS_URL, redis_keys

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from simulator.process import SimulatorProcess

MONITORING = ROOT / "monitoring"
RULES = MONITORING / "prometheus" / "alerts.yml"
RULE_TESTS = MONITORING / "prometheus" / "alerts_test.yml"
PROMETHEUS_CONFIG = MONITORING / "prometheus" / "prometheus.yml"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "productcrawler.json"
DATASOURCES = MONITORING / "grafana" / "provisioning" / "datasources" / "prometheus.yml"

#: Series Prometheus makes itself, not the crawl.
PROMETHEUS_OWN = {"up"}
METRIC_NAME = re.compile(r"\b(productcrawler_[a-z0-9_]+|up)\b(?!\s*\()")

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool is missing: apt-get install prometheus (`make test` does: scripts/test-tools.sh)")
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=120, check=False)


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"]
            for target in panel.get("targets", ())]


def rule_queries() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())
    return [(rule["alert"], rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    # Drop label matchers and strings: {status="429"} holds no metric name.
    bare = re.sub(r'\{[^}]*\}|"[^"]*"', "", expr)
    return set(METRIC_NAME.findall(bare))


# --- files -------------------------------------------------------------------


def test_alert_rules_are_valid_and_pass_their_unit_tests() -> None:
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", RULE_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Every alert is exercised by a test.
    alerts = {name for name, _ in rule_queries()}
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    exercised = {case["alertname"] for test in tests for case in test.get("alert_rule_test", ())
                 if case.get("exp_alerts")}
    assert exercised == alerts


def test_prometheus_config_is_valid_and_loads_the_rules() -> None:
    result = promtool("check", "config", PROMETHEUS_CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    assert config["rule_files"] == ["alerts.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["productcrawler"]  # the rules' up{job="productcrawler"}
    assert jobs["pushgateway"]["honor_labels"] is True  # pushed series keep job="productcrawler"
    assert job["dns_sd_configs"] == [{"names": ["crawler"], "type": "A", "port": 9410, "refresh_interval": "5s"}]


def test_dashboard_is_grafana_json_with_valid_queries_on_the_provisioned_datasource(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "productcrawler"
    datasource = yaml.safe_load(DATASOURCES.read_text())["datasources"][0]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        for target in panel.get("targets", ()):
            assert target["datasource"]["uid"] == datasource["uid"], panel["title"]
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Request rate vs cap", "Responses by status", "Latency percentiles",
            "In flight and waiting for a slot", "Retries by reason", "Products stored / missing / failed",
            "Pass progress", "ETA", "Per instance", "Database and Redis", "Last complete pass vs the one before",
            "Coverage by column", "Since the last complete pass", "Last run", "Stored per complete pass",
            "Coverage per complete pass"} <= titles
    # promtool parses each query (as a recording rule): a typo fails here.
    queries = dashboard_queries()
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, (_, expr) in enumerate(queries)]}]}
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_metric_names_are_found_in_queries() -> None:
    assert metric_names('sum by (le) (rate(productcrawler_x_bucket{status="5.."}[1m])) / up') == {
        "productcrawler_x_bucket", "up"}
    used = {name for _, expr in dashboard_queries() + rule_queries() for name in metric_names(expr)}
    assert "productcrawler_request_duration_seconds_bucket" in used
    assert len(used) >= 20, used


# --- a live crawl at 500/s ---------------------------------------------------

END = 2000  # 4 s at RATE: scraped a score of times while requests are in flight
RATE = 500
LINGER = 4.0
LOG_URL = re.compile(r"Prometheus metrics at (http://127\.0\.0\.1:\d+/metrics)")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(url: str) -> Samples:
    with _OPENER.open(url, timeout=5) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _total(samples: Samples, name: str) -> float:
    return sum(value for (sample, _), value in samples.items() if sample == name)


@pytest.fixture(scope="module")
def live_crawl(simulator: SimulatorProcess, pushgateway: Any) -> Iterator[dict[str, Any]]:
    """One crawl of ids 1..END at 500/s with MySQL and Redis, scraped throughout and after its end;
    what it pushed at its end, read back from a real Pushgateway."""
    database = f"pc_test_{uuid.uuid4().hex[:12]}"
    prefix = f"pctest:{uuid.uuid4().hex[:12]}"
    connection = pymysql.connect(**MYSQL)
    connection.cursor().execute(f"CREATE DATABASE {database} CHARACTER SET utf8mb4")
    simulator.set_faults(["503=10-19"])
    simulator.reset()
    command = crawl_command("-a", "start_id=1", "-a", f"end_id={END}",
                            settings={"MAX_REQUESTS_PER_SECOND": RATE, "METRICS_PORT": 0,
                                      "METRICS_LINGER": LINGER, "RETRY_BACKOFF_BASE": 0.1,
                                      "RETRY_BACKOFF_MAX": 0.5})
    env = crawl_env(API_BASE_URL=simulator.base_url, DATABASE_URL=f"mysql://root@127.0.0.1:3306/{database}",
                    REDIS_URL=REDIS_URL, REDIS_KEY_PREFIX=prefix, PUSHGATEWAY_URL=pushgateway.url)
    crawl = LoggedCrawl(command, env)
    process, lines, log = crawl.process, crawl.lines, crawl.log
    during: list[Samples] = []
    final: Samples | None = None
    try:
        url = None
        deadline = time.monotonic() + 60
        while final is None and time.monotonic() < deadline and process.poll() is None:
            try:
                line = lines.get(timeout=0.2) or ""  # None: the log ended
            except queue.Empty:
                line = ""
            if url is None:
                found = LOG_URL.search(line)
                url = found[1] if found else None
            elif "Serving the final metrics" in line:
                final = _scrape(url)
            elif line == "":
                during.append(_scrape(url))
        assert final is not None, "no final scrape:\n" + "".join(log)[-3000:]
        assert process.wait(timeout=30) == 0, "".join(log)[-3000:]
        pushed = {sample.name for family in text_string_to_metric_families(pushgateway.metrics())
                  for sample in family.samples if sample.labels.get("job") == "productcrawler"}
        yield {"during": during, "final": final, "arrivals": simulator.arrivals(), "log": log, "pushed": pushed}
    finally:
        crawl.kill()
        simulator.set_faults([])
        connection.cursor().execute(f"DROP DATABASE IF EXISTS {database}")
        connection.close()
        client = redis.Redis.from_url(REDIS_URL)
        keys = redis_keys(client, prefix)
        if keys:
            client.delete(*keys)
        client.close()


def test_every_metric_the_dashboard_and_rules_use_is_exposed_by_a_crawl(live_crawl: dict[str, Any]) -> None:
    # Scraped from the crawl while it runs, or pushed by it to the Pushgateway at its end.
    assert "productcrawler_pass_coverage" in live_crawl["pushed"]
    exposed = {name for name, _ in live_crawl["final"]} | live_crawl["pushed"]
    missing = {}
    for source, queries in (("dashboard", dashboard_queries()), ("rules", rule_queries())):
        for title, expr in queries:
            unknown = metric_names(expr) - exposed - PROMETHEUS_OWN
            if unknown:
                missing[f"{source}: {title}"] = sorted(unknown)
    assert not missing


def test_latency_histogram_counts_every_response_and_nothing_stays_in_flight(
        live_crawl: dict[str, Any]) -> None:
    final = live_crawl["final"]
    arrivals = live_crawl["arrivals"]
    answered = [arrival for arrival in arrivals if arrival[2] is not None]
    missing = sum(1 for i in range(1, END + 1) if catalog.is_missing(i))
    # Every id once, plus the ten 503s retried.
    assert len(arrivals) == len(answered) == END + 10
    responses = _total(final, "productcrawler_responses_total")
    histogram = _total(final, "productcrawler_request_duration_seconds_count")
    assert histogram == responses == len(answered)
    by_outcome = {dict(labels)["outcome"]: value for (name, labels), value in final.items()
                  if name == "productcrawler_request_duration_seconds_count"}
    assert by_outcome == {"2xx": END - missing, "404": missing, "5xx": 10, "timeout": 0, "error": 0}
    # The +Inf bucket is the count; the latencies are plausible for a local simulator.
    assert final[("productcrawler_request_duration_seconds_bucket", (("le", "+Inf"), ("outcome", "2xx")))] \
        == END - missing
    assert 0 < _total(final, "productcrawler_request_duration_seconds_sum") / histogram < 1.0
    # At the end nothing is in flight or waiting; during the crawl there was.
    assert final[("productcrawler_requests_in_flight", ())] == 0
    assert final[("productcrawler_requests_waiting_for_slot", ())] == 0
    assert max(s[("productcrawler_requests_in_flight", ())] for s in live_crawl["during"]) > 0
    assert max(s[("productcrawler_requests_waiting_for_slot", ())] for s in live_crawl["during"]) > 0
    # The rest of what the crawl exposes agrees.
    assert final[("productcrawler_pass_ids_done", ())] == final[("productcrawler_pass_ids_total", ())] == END
    assert final[("productcrawler_database_rows_written_total", (("table", "products"),))] == END - missing
    assert final[("productcrawler_database_up", ())] == final[("productcrawler_redis_up", ())] == 1
    assert final[("productcrawler_database_batch_duration_seconds_count", ())] > 0
    assert final[("productcrawler_redis_call_duration_seconds_count", ())] > 0
    [(pass_info, value)] = [(labels, v) for (name, labels), v in final.items() if name == "productcrawler_pass_info"]
    assert value == 1 and dict(pass_info)["pass_id"].isdigit()
    assert abs(final[("productcrawler_pass_start_time_seconds", ())] - arrivals[0][0]) < 30
