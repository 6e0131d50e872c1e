"""The storage pipeline against the real MySQL: one bad row never sinks its batch."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT, crawl_env, mysql_query, run_crawl

# A spider that hands the pipeline items directly, one of them out of range
# for DECIMAL(10,2): cleaning would never let it through, so this is the
# database's own check being exercised.
SCRIPT = """
import sys
from decimal import Decimal
from scrapy import Spider
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import get_project_settings
from productcrawler.items import FAILED, FailureItem, ProductItem
from productcrawler.storage.database import utcnow

class Items(Spider):
    name = "items"

    async def start(self):
        for i in range(1, 11):
            yield ProductItem(i, f"product {i}", Decimal("1e12") if i == 5 else Decimal("9.99"), 1,
                              None, None, None, None, utcnow())
        yield FailureItem(11, FAILED, 503, "http_503", 4)

settings = get_project_settings()
settings.set("DATABASE_URL", sys.argv[1], priority="cmdline")
settings.set("EXTENSIONS", {}, priority="cmdline")
process = CrawlerProcess(settings)
process.crawl(Items)
process.start()
"""


def test_a_row_the_database_rejects_is_recorded_and_the_rest_of_its_batch_stored(mysql_url):
    result = subprocess.run([sys.executable, "-c", SCRIPT, mysql_url], cwd=ROOT, env=crawl_env(),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    stored = [r[0] for r in mysql_query(mysql_url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    failures = mysql_query(mysql_url, "SELECT product_id, outcome, reason FROM crawl_failures ORDER BY product_id")
    assert [f[:2] for f in failures] == [(5, "failed"), (11, "failed")]
    assert failures[0][2].startswith("db_rejected") and "range" in failures[0][2]
    assert "rejected the row of product 5" in result.stderr


def test_write_batches_are_full_at_a_high_rate(clean_arrival_server, mysql_url):
    # At 400/s a flush interval of 0.5 s holds ~200 outcomes: batches should
    # be far bigger than what comes in during one write (a handful).
    result = run_crawl("-a", "end_id=2400", settings={
        "API_BASE_URL": clean_arrival_server.base_url, "DATABASE_URL": mysql_url,
        "MAX_REQUESTS_PER_SECOND": 400, "DATABASE_BATCH_SIZE": 200, "DATABASE_FLUSH_INTERVAL": 0.5})
    assert result.returncode == 0, result.stderr[-3000:]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM products")[0][0] == 2400
    batches = int(re.search(r"'productcrawler/db/batches': (\d+)", result.stderr).group(1))
    assert 2400 / batches >= 50, batches
