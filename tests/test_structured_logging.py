"""LOG_FORMAT=json: every line of a real crawl's log is one JSON object with the structured fields."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tests.support.crawls import crawl_env, run_crawl

if TYPE_CHECKING:
    from pathlib import Path

    from simulator.process import SimulatorProcess

END = 40


def _crawl(simulator: SimulatorProcess, tmp_path: Path, *, settings: dict[str, Any] | None = None,
           **env: str) -> Any:
    environment = crawl_env(API_BASE_URL=simulator.base_url,
                            DATABASE_URL=f"sqlite:///{tmp_path / 'products.db'}", **env)
    return run_crawl("-a", "start_id=1", "-a", f"end_id={END}", env=environment,
                     settings={"RETRY_BACKOFF_BASE": 0.1, "RETRY_BACKOFF_MAX": 0.2, **(settings or {})})


def test_json_lines_carry_time_level_logger_message_and_the_request_fields(
        clean_simulator: SimulatorProcess, tmp_path: Path) -> None:
    clean_simulator.set_faults(["503=7"])
    result = _crawl(clean_simulator, tmp_path, settings={"LOG_LEVEL": "DEBUG"}, LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert len(records) > END
    for record in records:
        assert isinstance(record, dict)
        assert {"time", "level", "logger", "message"} <= set(record), record
        assert datetime.fromisoformat(record["time"]).utcoffset().total_seconds() == 0
        assert "spider" not in record and "crawler" not in record
    # The 503 of product 7, then its retry: product id, attempt, status and elapsed time.
    [held] = [r for r in records if r["message"].startswith("Retry 1 of") and r.get("product_id") == 7]
    [crawled] = [r for r in records if r["logger"] == "scrapy.core.engine" and r.get("product_id") == 7]
    assert [(r["attempt"], r["status"]) for r in (held, crawled)] == [(1, 503), (2, 200)]
    assert all(0 < r["elapsed"] < 30 for r in (held, crawled))
    # Once the pass is open every line names it and the instance.
    [started] = [r for r in records if r["message"].startswith("Starting pass")]
    [finished] = [r for r in records if r["message"].startswith("Finished (finished)")]
    assert finished["pass_id"] == started["pass_id"] == int(started["message"].split()[2])
    assert finished["instance"] and finished["level"] == "INFO"
    assert all("pass_id" in r for r in records[records.index(started):])


def test_default_log_stays_human_and_a_log_file_gets_json(clean_simulator: SimulatorProcess,
                                                          tmp_path: Path) -> None:
    human = _crawl(clean_simulator, tmp_path)
    assert human.returncode == 0, human.stderr[-3000:]
    assert "] INFO: Finished (finished)" in human.stderr
    assert not [line for line in human.stderr.splitlines() if line.startswith("{\"time\"")]

    log_file = tmp_path / "crawl.log"
    to_file = _crawl(clean_simulator, tmp_path, settings={"LOG_FILE": log_file, "LOG_FORMAT": "json"})
    assert to_file.returncode == 0, to_file.stderr[-3000:]
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert any(r["message"].startswith("Finished (finished)") for r in records)


def test_an_unknown_log_format_is_a_configuration_error(clean_simulator: SimulatorProcess,
                                                        tmp_path: Path) -> None:
    result = _crawl(clean_simulator, tmp_path, LOG_FORMAT="xml")
    assert result.returncode == 2
    assert result.stderr.strip() == ("productcrawler: configuration error: LOG_FORMAT='xml' is not a log "
                                     "format; expected 'json' or 'human'")


def test_json_logging_honours_log_enabled_false(clean_simulator: SimulatorProcess, tmp_path: Path) -> None:
    """``--nolog`` (LOG_ENABLED=False) silences the JSON log as it does Scrapy's own."""
    result = _crawl(clean_simulator, tmp_path, settings={"LOG_ENABLED": False}, LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert [line for line in result.stderr.splitlines() if line.startswith("{")] == []


def test_json_lines_name_the_instance_as_the_shared_pass_does(clean_simulator: SimulatorProcess, tmp_path: Path,
                                                              redis_prefix: str) -> None:
    """With REDIS_URL the ``instance`` field is the pass's instance id (what ``scrapy progress`` lists)."""
    from tests.support.services import REDIS_URL

    result = _crawl(clean_simulator, tmp_path, LOG_FORMAT="json", REDIS_URL=REDIS_URL,
                    REDIS_KEY_PREFIX=redis_prefix)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in result.stderr.splitlines()]
    [started] = [r for r in records if " through Redis as instance " in r["message"]]
    instance = started["message"].split(" as instance ")[1].split()[0]
    assert instance.count(":") == 2  # host:pid:token
    assert started["instance"] == instance
    assert {r["instance"] for r in records if "instance" in r} == {instance}
