"""KEEP_ANSWER: each product's JSON as received, written only when its digest changed.

Crawled for real against the changing-catalogue imitation. That an unchanged pass
does not write the answers again is read from PostgreSQL's own WAL position (a
server of this test session: nothing else writes to it meanwhile), not from our
stats; the documented queries read a field of the answer in each database.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from tests.support.crawls import run_crawl
from tests.support.imitations.changing_catalogue import CatalogueApi
from tests.support.services import database_query

END = 30
#: Each answer carries a description of 6 KB that does not compress (PostgreSQL compresses large
#: values): rewriting 30 of them is ~180 KB of WAL.
DESCRIPTION_LENGTH = 6000


def description(i: int) -> str:
    return random.Random(i).randbytes(DESCRIPTION_LENGTH // 2).hex()


def product(i: int, version: int = 1) -> dict:
    item = {"id": i, "name": f"Board {i}", "price": 100 + i, "stock": i, "status": "active",
            "description": description(i)}
    if version >= 2 and i == 7:
        item["status"] = "archived"  # no column of ours: only the answer changed
    if i == 9:
        item["description"] = description(i) * 4  # over KEEP_ANSWER_MAX_BYTES
    return item


@pytest.fixture(scope="module")
def api():
    with CatalogueApi() as server:
        yield server


def crawl(api: CatalogueApi, url: str, version: int):
    api.put([product(i, version) for i in range(1, END + 1)])
    result = run_crawl("-a", "start_id=1", "-a", f"end_id={END}",
                       settings={"API_BASE_URL": api.base_url, "DATABASE_URL": url, "KEEP_ANSWER": "1",
                                 "KEEP_ANSWER_MAX_BYTES": "20000"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


#: docs/what-changed.md's query of a field of the kept answer, per database.
STATUS_QUERY = {
    "mysql": "SELECT product_id, JSON_VALUE(answer, '$.status') FROM products WHERE product_id IN (7, 8)",
    "sqlite": "SELECT product_id, json_extract(answer, '$.status') FROM products WHERE product_id IN (7, 8)",
    "postgresql": "SELECT product_id, answer ->> 'status' FROM products WHERE product_id IN (7, 8)",
}


def wal_position(server) -> int:
    [(position,)] = server.admin("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
    return int(position)


@pytest.mark.parametrize("kind", ["mysql", "sqlite", "postgresql"])
def test_the_answer_is_kept_once_per_change_and_its_fields_can_be_queried(api, kind, request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'answers.db'}" if kind == "sqlite" else request.getfixturevalue(f"{kind}_url"))
    server = request.getfixturevalue("postgres_server") if kind == "postgresql" else None
    first = crawl(api, url, 1)
    assert "'productcrawler/answers/too_large': 1" in first.stderr
    [(answer, digest)] = database_query(url, "SELECT answer, answer_digest FROM products WHERE product_id = 5")
    sent = json.dumps(product(5)).encode()  # aiohttp's json_response writes json.dumps' text
    assert digest == hashlib.sha256(sent).hexdigest()
    assert (answer if isinstance(answer, dict) else json.loads(answer)) == product(5)
    # Over KEEP_ANSWER_MAX_BYTES: the digest alone.
    [(big, big_digest)] = database_query(url, "SELECT answer, answer_digest FROM products WHERE product_id = 9")
    assert big is None and big_digest == hashlib.sha256(json.dumps(product(9)).encode()).hexdigest()

    before = wal_position(server) if server else None
    second = crawl(api, url, 1)  # nothing changed
    if server is not None:
        written = wal_position(server) - before
        # 30 touched rows are a few KB of WAL; the answers again would be ~180 KB.
        assert written < DESCRIPTION_LENGTH * 5, written
    assert "answers/written" not in second.stderr

    third = crawl(api, url, 2)  # product 7's status changed, which only its answer holds
    assert "'productcrawler/answers/written': 1" in third.stderr
    assert database_query(url, STATUS_QUERY[kind]) in ([(7, "archived"), (8, "active")],
                                                        [(8, "active"), (7, "archived")])
