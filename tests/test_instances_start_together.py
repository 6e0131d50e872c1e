"""Several instances started in the same second share one pass: each id is fetched once."""

from __future__ import annotations

import pytest

from tests.support.catalogue import assert_pass_complete
from tests.support.crawls import finish, start_crawl
from tests.support.services import REDIS_URL

END = 1500


@pytest.mark.parametrize("fresh", [False, True], ids=["after-a-finished-pass", "all-given-fresh"])
def test_three_instances_started_together_fetch_each_id_once(fresh, clean_simulator, mysql_url, redis_prefix):
    settings = {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url,
                "MAX_REQUESTS_PER_SECOND": 500, "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": redis_prefix}
    code, output = finish(start_crawl("-a", f"end_id={END}", settings=settings))
    assert code == 0 and "Started pass 1" in output, output[-3000:]
    clean_simulator.reset()

    args = ("-a", f"end_id={END}", *(("-a", "fresh=1") if fresh else ()))
    processes = [start_crawl(*args, settings=settings) for _ in range(3)]
    outputs = []
    for process in processes:
        code, output = finish(process)
        assert code == 0, output[-3000:]
        outputs.append(output)
    assert sum("Started pass 2 " in output for output in outputs) == 1
    assert sum("Joined pass 2 " in output for output in outputs) == 2
    # No fault is set, so no retry is due: every id arrives exactly once.
    fetched = sorted(product_id for _at, product_id, _status, _fault in clean_simulator.arrivals())
    assert fetched == list(range(1, END + 1)), "an id was fetched twice or never"
    assert_pass_complete(mysql_url, END)
