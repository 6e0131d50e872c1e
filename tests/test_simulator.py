"""The bundled API simulator, run as a subprocess exactly as the tests, bench and demo use it."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from simulator import SimulatorProcess, catalog, shapes
from simulator.faults import FaultConfig, FaultRule
from tests.support.catalogue import missing_ids, present_ids
from tests.support.crawls import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

VERSION = 493_000
RETRY_AFTER = 3


@pytest.fixture(scope="module")
def server() -> Iterator[SimulatorProcess]:
    with SimulatorProcess("--catalog-version", str(VERSION), "--slow-delay", "0.3",
                          "--retry-after", str(RETRY_AFTER)) as process:
        yield process


@pytest.fixture
def sim(server: SimulatorProcess) -> SimulatorProcess:
    return server.clean()


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self.body = response.read()

    def json(self) -> Any:
        return json.loads(self.body)


def get(sim: SimulatorProcess, path: str, timeout: float = 5.0,
        headers: dict[str, str] | None = None) -> Answer:
    url = urlsplit(sim.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers or {})
        return Answer(connection.getresponse())
    finally:
        connection.close()


def get_product(sim: SimulatorProcess, product_id: int | str, timeout: float = 5.0,
                headers: dict[str, str] | None = None) -> Answer:
    return get(sim, f"/v1/product/{product_id}", timeout, headers)


def first_present_ids(count: int, start: int = 1) -> list[int]:
    return present_ids(start + 1000, start)[:count]


def first_missing_ids(count: int) -> list[int]:
    return missing_ids(10_000)[:count]


# --- catalogue -------------------------------------------------------------------


@pytest.mark.parametrize("product_id", [*first_present_ids(3), 12_345, 9_999_999, catalog.MAX_PRODUCT_ID])
def test_product_is_the_catalogue_product(sim: SimulatorProcess, product_id: int) -> None:
    answer = get_product(sim, product_id)
    assert answer.status == 200
    assert answer.headers["Content-Type"] == "application/json; charset=utf-8"
    assert answer.json() == catalog.product(product_id, VERSION)


def test_product_looks_like_an_ecommerce_product() -> None:
    item = catalog.product(12_345, VERSION)
    assert set(item) == {"id", "name", "price", "currency", "stock", "category", "brand",
                         "rating", "sales_count", "description", "images", "updated_at"}
    assert item["id"] == 12_345 and item["currency"] == "CNY"
    assert item["name"].startswith(item["brand"] + " ")
    assert item["category"].count("/") == 1
    assert item["images"][0].startswith("https://")
    assert item["updated_at"] == "2026-03-29T16:00:00Z"  # hour 493000
    products = [catalog.product(i, VERSION) for i in range(1, 2001)]
    assert len({p["category"] for p in products}) >= 10
    assert len({p["brand"] for p in products}) >= 20
    for p in products:
        assert round(p["price"], 2) == p["price"] > 0
        assert 0 <= p["rating"] <= 5 and round(p["rating"], 2) == p["rating"]
        assert p["stock"] >= 0 and p["sales_count"] >= 0


def test_about_three_percent_of_ids_are_missing(sim: SimulatorProcess) -> None:
    share = sum(catalog.is_missing(i) for i in range(1, 100_001)) / 100_000
    assert 0.025 < share < 0.035
    for product_id in first_missing_ids(3):
        answer = get_product(sim, product_id)
        assert (answer.status, answer.json()) == (404, {"error": "product not found"})


def test_hourly_fields_follow_the_version_and_the_rest_is_stable() -> None:
    before = [catalog.product(i, VERSION) for i in range(1, 101)]
    after = [catalog.product(i, VERSION + 1) for i in range(1, 101)]
    for old, new in zip(before, after):
        assert (old["name"], old["brand"], old["category"]) == (new["name"], new["brand"], new["category"])
    for field in ("price", "stock", "sales_count", "updated_at"):
        assert sum(old[field] != new[field] for old, new in zip(before, after)) > 10, field
    # Deterministic across processes, whatever their hash seed: what another process
    # (the simulator, a test) computes is what this one computes.
    script = ("import json, sys; from simulator import catalog; "
              "print(json.dumps([catalog.product(i, int(sys.argv[1])) for i in range(1, 101)]))")
    for seed in ("1", "2"):
        other = subprocess.run([sys.executable, "-c", script, str(VERSION)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONHASHSEED": seed}, check=True, cwd=ROOT)
        assert json.loads(other.stdout) == json.loads(json.dumps(before))


@pytest.mark.parametrize("raw_id", ["abc", "0", "-1", "1.5", "%EF%BC%91%EF%BC%92", "99999999999999999999999"])
def test_invalid_id_is_400(sim: SimulatorProcess, raw_id: str) -> None:
    answer = get_product(sim, raw_id)
    assert (answer.status, answer.json()) == (400, {"error": "invalid product id"})
    assert [(a[1], a[2]) for a in sim.arrivals()] == [(None, 400)]


# --- status faults ---------------------------------------------------------------


@pytest.mark.parametrize(("mode", "status", "retry_after"), [
    ("429s", 429, str(RETRY_AFTER)),
    ("503ra", 503, str(RETRY_AFTER)),
    ("503", 503, None),
    ("500", 500, None),
    ("502", 502, None),
    ("400", 400, None),
    ("403", 403, None),
])
def test_status_fault_then_the_product(sim: SimulatorProcess, mode: str, status: int,
                                       retry_after: str | None) -> None:
    product_id = first_present_ids(1, start=10)[0]
    sim.set_faults([f"{mode}={product_id}"])
    answer = get_product(sim, product_id)
    assert answer.status == status
    assert answer.headers.get("Retry-After") == retry_after
    assert "error" in answer.json()
    assert get_product(sim, product_id).status == 200
    assert [a[1:] for a in sim.arrivals()] == [(product_id, status, mode), (product_id, 200, "")]


def test_429_with_an_http_date_is_never_early(sim: SimulatorProcess) -> None:
    sim.set_faults(["429date=5"])
    sent = time.time()
    answer = get_product(sim, 5)
    assert answer.status == 429
    retry_at = parsedate_to_datetime(answer.headers["Retry-After"]).timestamp()
    assert sent + RETRY_AFTER <= retry_at <= time.time() + RETRY_AFTER + 1


def normal_status(product_id: int) -> int:
    return 404 if catalog.is_missing(product_id) else 200


def test_times_counts_attempts_per_id(sim: SimulatorProcess) -> None:
    sim.set_faults(["503=10-12,%1000+7@2", "403=20@*"])
    for product_id in (11, 3007):  # 11 is a missing id: faults come first
        assert [get_product(sim, product_id).status for _ in range(3)] == [503, 503, normal_status(product_id)]
    assert [get_product(sim, 20).status for _ in range(4)] == [403] * 4
    assert get_product(sim, 13).status == normal_status(13)  # not in the spec


def test_rules_matching_one_id_take_turns(sim: SimulatorProcess) -> None:
    sim.set_faults(["503=5@2", "429s=1-9"])
    assert [get_product(sim, 5).status for _ in range(4)] == [503, 503, 429, 200]


def test_retry_after_can_be_changed_at_runtime(sim: SimulatorProcess) -> None:
    sim.set_faults(["429s=5@*"], retry_after=7)
    assert get_product(sim, 5).headers["Retry-After"] == "7"
    sim.set_faults(["429s=5@*"])  # back to the startup value
    assert get_product(sim, 5).headers["Retry-After"] == str(RETRY_AFTER)


# --- timing faults ---------------------------------------------------------------


def test_slow_answers_normally_after_the_delay(sim: SimulatorProcess) -> None:
    # Only the first attempt is slow. Judged from the arrival record's fault
    # and from a ratio within this run (the best of three later answers against
    # the slow one), not from a budget a loaded machine can overrun.
    sim.set_faults(["slow=5"])
    elapsed = []
    for _ in range(4):
        started = time.monotonic()
        answer = get_product(sim, 5)
        elapsed.append(time.monotonic() - started)
        assert answer.json() == catalog.product(5, VERSION)
    assert elapsed[0] >= 0.3
    assert min(elapsed[1:]) < elapsed[0] / 2, elapsed
    assert [(a[1], a[3]) for a in sim.arrivals()] == [(5, "slow"), (5, ""), (5, ""), (5, "")]


def test_hang_never_answers(sim: SimulatorProcess) -> None:
    sim.set_faults(["hang=5@*"])
    with pytest.raises(TimeoutError):
        get_product(sim, 5, timeout=0.5)
    assert [a[1:] for a in sim.arrivals()] == [(5, None, "hang")]
    assert sim.stats()["by_status"] == {"none": 1}


# --- bad bodies --------------------------------------------------------------------


def test_truncated_json(sim: SimulatorProcess) -> None:
    sim.set_faults(["truncated=5"])
    answer = get_product(sim, 5)
    full = json.dumps(catalog.product(5, VERSION), ensure_ascii=False, separators=(",", ":")).encode()
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.body == full[:len(full) // 2]


def test_html_maintenance_page(sim: SimulatorProcess) -> None:
    sim.set_faults(["html=5"])
    answer = get_product(sim, 5)
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/html")
    assert answer.body.startswith(b"<!DOCTYPE html>")


def test_not_a_product(sim: SimulatorProcess) -> None:
    sim.set_faults(["notproduct=5"])
    answer = get_product(sim, 5)
    assert (answer.status, answer.json()) == (200, {"status": "ok", "data": None})


def test_error_envelope(sim: SimulatorProcess) -> None:
    sim.set_faults(["error200=5"])
    answer = get_product(sim, 5)
    assert (answer.status, answer.json()) == (200, {"code": 40004, "msg": "product offline", "data": None})


def test_wrong_id(sim: SimulatorProcess) -> None:
    sim.set_faults(["wrongid=5"])
    assert get_product(sim, 5).json() == catalog.product(6, VERSION)


def test_dirty_values(sim: SimulatorProcess) -> None:
    sim.set_faults(["dirty=3-5@*"])
    items = {i: get_product(sim, i).json() for i in (3, 4, 5)}
    for product_id, item in items.items():
        assert item == catalog.variant("dirty", product_id, VERSION)
        clean = catalog.product(product_id, VERSION)
        assert item["name"].startswith("  <b>") and "\n" in item["name"]
        assert "<" in item["category"] and "<" in item["brand"]
        assert item["stock"] == str(clean["stock"]) and item["sales_count"] < 0
    prices = {i: catalog.product(i, VERSION)["price"] for i in (3, 4)}
    assert [items[i]["price"] for i in (3, 4, 5)] == [f"¥{prices[3]:,.2f}", f"{prices[4]:,.2f}", None]
    dear = next(i for i in range(3, 3000, 3) if catalog.product(i, VERSION)["price"] >= 1000)
    assert "," in catalog.variant("dirty", dear, VERSION)["price"]
    assert items[3]["rating"] == f"{catalog.product(3, VERSION)['rating']:.1f}" and items[4]["rating"] == 7.5


def test_hostile_payloads(sim: SimulatorProcess) -> None:
    sim.set_faults(["huge=1", "nested=2", "badutf8=3", "sqlish=4", "emoji=5", "outofrange=6"])
    assert len(get_product(sim, 1).body) > 3_000_000
    nested = get_product(sim, 2).body
    assert nested == b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(nested)
    with pytest.raises(UnicodeDecodeError):
        get_product(sim, 3).body.decode("utf-8")
    assert get_product(sim, 4).json()["name"] == "Robert'); DROP TABLE products;--"
    emoji_name = get_product(sim, 5).json()["name"]
    assert emoji_name == f"📱 {catalog.product(5, VERSION)['name']} 🚀"
    item = get_product(sim, 6).json()
    assert (item["price"], item["stock"], item["sales_count"], item["rating"]) == (1e12, 10**12, -5, 99)


# --- rate limit, record, control -------------------------------------------------


def test_rate_limit_answers_429_above_the_cap(sim: SimulatorProcess) -> None:
    sim.set_faults([], rate_limit=5)
    answers = [get_product(sim, i) for i in first_present_ids(8)]
    assert [a.status for a in answers] == [200] * 5 + [429] * 3
    assert answers[-1].headers["Retry-After"] == "1"
    assert sim.stats()["by_fault"] == {"rate_limited": 3}
    time.sleep(1.05)
    assert get_product(sim, first_present_ids(1)[0]).status == 200


def test_arrivals_record_every_request(sim: SimulatorProcess) -> None:
    missing = first_missing_ids(1)[0]
    sim.set_faults(["503=2"])
    started = time.time()
    for product_id in (1, 2, missing):
        get_product(sim, product_id)
    arrivals = sim.arrivals()
    assert [a[1:] for a in arrivals] == [(1, 200, ""), (2, 503, "503"), (missing, 404, "")]
    assert started <= arrivals[0][0] <= arrivals[1][0] <= arrivals[2][0] <= time.time()
    assert sim.arrivals(since=arrivals[1][0]) == arrivals[1:]
    assert sim.stats() == {"total": 3, "by_status": {"200": 1, "404": 1, "503": 1}, "by_fault": {"503": 1}}


def test_any_other_path_is_a_recorded_404(sim: SimulatorProcess) -> None:
    answer = get(sim, "/v2/product/1")
    assert answer.status == 404
    assert [a[1:] for a in sim.arrivals()] == [(None, 404, "")]


def test_reset_clears_arrivals_and_attempts(sim: SimulatorProcess) -> None:
    sim.set_faults(["503=5"])
    assert get_product(sim, 5).status == 503
    sim.reset()
    assert sim.arrivals() == [] and sim.stats()["total"] == 0
    assert get_product(sim, 5).status == 503


def test_set_faults_rejects_a_bad_configuration(sim: SimulatorProcess) -> None:
    sim.set_faults(["503=5@*"])
    with pytest.raises(ValueError, match="unknown mode 'nope'"):
        sim.set_faults(["nope=1"])
    with pytest.raises(ValueError, match="unknown option"):
        sim.set_faults([], retry_afer=1)
    assert get_product(sim, 5).status == 503  # the previous configuration stays


@pytest.mark.parametrize(("spec", "message"), [
    ("503", "not MODE=IDSPEC"),
    ("teapot=1", "unknown mode"),
    ("503=", "not a whole number"),
    ("503=0", "at least 1"),
    ("503=9-3", "range is empty"),
    ("503=%0", "at least 1"),
    ("503=%3+3", "below the modulus"),
    ("503=1@0", "TIMES"),
    ("503=1@x", "TIMES"),
])
def test_bad_fault_specs_are_rejected(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultRule.parse(spec)


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="rate_limit=0"):
        FaultConfig.build(rate_limit=0)
    with pytest.raises(ValueError, match="retry_after='1.5'"):
        FaultConfig.build(retry_after="1.5")


def test_command_line_options_and_exit(sim: SimulatorProcess) -> None:
    """A second server: another free port, current-hour catalogue, faults from the CLI, clean exit."""
    other = SimulatorProcess("--fault", "503=7@*", "--rate-limit", "1000").start()
    try:
        assert urlsplit(other.url).port not in (0, urlsplit(sim.url).port)
        assert other.base_url == other.url + "/v1"
        before = catalog.current_version()
        item = get_product(other, 12_345).json()
        assert item in (catalog.product(12_345, before), catalog.product(12_345, catalog.current_version()))
        assert get_product(other, 7).status == 503
    finally:
        assert other.stop() == 0


def test_a_bad_command_line_fails_to_start() -> None:
    with pytest.raises(RuntimeError, match="failed to start"):
        SimulatorProcess("--fault", "teapot=1").start()


# --- shapes and keys ---------------------------------------------------------------


def test_default_shape_is_the_articles_id_shape(sim: SimulatorProcess) -> None:
    product_id = first_present_ids(1)[0]
    item = get_product(sim, product_id).json()
    assert item["id"] == product_id and "product_id" not in item


@pytest.mark.parametrize(("shape", "path_to_id"), [
    ("product_id", ("product_id",)), ("envelope", ("data", "id")), ("renamed", ("data", "sku")),
    ("shopify", ("product", "id")),
])
def test_shapes_can_be_chosen_at_runtime(sim: SimulatorProcess, shape: str, path_to_id: tuple[str, ...]) -> None:
    product_id = first_present_ids(1)[0]
    sim.set_faults([], shape=shape)
    answer = get_product(sim, product_id).json()
    assert answer == shapes.shaped(catalog.product(product_id, VERSION), shape)
    for key in path_to_id:
        answer = answer[key]
    assert answer == product_id
    sim.set_faults([])
    assert get_product(sim, product_id).json() == catalog.product(product_id, VERSION)


def test_an_api_key_is_required_once_set(sim: SimulatorProcess) -> None:
    product_id = first_present_ids(1)[0]
    sim.set_faults([], api_key="right")
    assert get_product(sim, product_id).status == 401
    assert get_product(sim, product_id, headers={"Authorization": "Bearer wrong"}).status == 401
    assert get_product(sim, product_id, headers={"Authorization": "Bearer right"}).status == 200
    assert [a[2:] for a in sim.arrivals()] == [(401, "unauthorized"), (401, "unauthorized"), (200, "")]


def test_revoke_after_answers_401_to_every_later_request(sim: SimulatorProcess) -> None:
    ids = first_present_ids(5)
    sim.set_faults([], revoke_after=3)
    assert [get_product(sim, i).status for i in ids] == [200, 200, 200, 401, 401]
    assert sim.stats()["by_fault"] == {"revoked": 2}
    sim.reset()  # a reset starts the count again
    assert get_product(sim, ids[0]).status == 200


def test_bad_shape_and_key_options_are_rejected(sim: SimulatorProcess) -> None:
    with pytest.raises(ValueError, match="shape='xml'"):
        sim.set_faults([], shape="xml")
    with pytest.raises(ValueError, match="api_key"):
        FaultConfig.build(api_key="")
    with pytest.raises(RuntimeError, match="failed to start"):
        SimulatorProcess("--shape", "xml").start()
