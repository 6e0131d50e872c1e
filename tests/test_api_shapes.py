"""The real crawl against the simulator in each payload shape: every row, column by column."""

from __future__ import annotations

import pytest

from simulator import catalog, shapes
from tests.support.catalogue import CATALOG_VERSION, PRODUCT_COLUMNS, catalogue_row
from tests.support.crawls import run_crawl
from tests.support.services import mysql_query

END = 300


@pytest.mark.parametrize("shape", shapes.SHAPES)
def test_each_shape_stores_every_product_column_by_column(clean_simulator, mysql_url, shape):
    clean_simulator.set_faults([], shape=shape)
    settings = {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url}
    if shapes.PRODUCT_FIELDS[shape]:  # id, product_id and envelope need no configuration
        settings["PRODUCT_FIELDS"] = shapes.PRODUCT_FIELDS[shape]
    result = run_crawl("-a", "start_id=1", "-a", f"end_id={END}", settings=settings)
    assert result.returncode == 0, result.stderr[-3000:]

    present = [i for i in range(1, END + 1) if not catalog.is_missing(i)]
    rows = mysql_query(mysql_url, f"SELECT {', '.join(PRODUCT_COLUMNS)} FROM products ORDER BY product_id")
    expected = [catalogue_row(i, CATALOG_VERSION) for i in present]
    if shape == "shopify":  # a Shopify product has no rating or sales count: NULL
        expected = [(*row[:6], None, None) for row in expected]
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert dict(zip(PRODUCT_COLUMNS, row)) == dict(zip(PRODUCT_COLUMNS, want)), shape
    failures = mysql_query(mysql_url, "SELECT outcome, COUNT(*) FROM crawl_failures GROUP BY outcome")
    assert failures == [("missing", END - len(present))]
    assert f"{len(present)} stored, {END - len(present)} missing, 0 failed" in result.stderr


def test_error_envelopes_are_bad_responses_retried_then_failed(clean_simulator, mysql_url):
    clean_simulator.set_faults(["error200=5@*", "error200=6@2"], shape="envelope")
    result = run_crawl("-a", "start_id=1", "-a", "end_id=8",
                       settings={"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url,
                                 "RETRY_BACKOFF_BASE": 0.1})
    assert result.returncode == 0, result.stderr[-3000:]
    failures = mysql_query(mysql_url, "SELECT product_id, outcome, http_status, reason, attempts "
                                      "FROM crawl_failures WHERE outcome = 'failed'")
    assert failures == [(5, "failed", 200, "bad_response/error_envelope", 4)]
    stored = {r[0] for r in mysql_query(mysql_url, "SELECT product_id FROM products")}
    assert 6 in stored or catalog.is_missing(6)
    assert 5 not in stored
