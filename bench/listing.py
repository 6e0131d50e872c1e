"""A catalogue refreshed per id, by listing and incrementally, against each vendor's imitation at its budget.

Usage (from the repository root; about 20 minutes with the defaults, most of it waiting on the budgets)::

    .venv/bin/python bench/listing.py                          # 50,000 products per API
    .venv/bin/python bench/listing.py --quick                  # 5,000: a smoke run
    .venv/bin/python bench/listing.py --apis shopify,bestbuy --json listing.json

Each API of ``tests/support/imitations/`` is served in this process (``Served``)
with a catalogue of ``--size`` products and the budget its vendor documents
(the imitations' defaults: Shopify REST a bucket of 40 leaking 2/s; BigCommerce
150 requests a 30-s window; Best Buy 5/s; DummyJSON 200/s; Shopify GraphQL
1,000 cost points restoring 50/s; WooCommerce and Magento none). Every crawl
is the real ``scrapy crawl products`` in a child process, with a cookbook
recipe (docs/cookbook.md) pointed at the imitation, the API's real key in the
environment and a fresh SQLite file; its CPU (user + sys, start-up included) is
the child's own, from ``wait4``.

- **listing**: the ``NAME-list`` recipe (``shopify-graphql`` for GraphQL), the
  whole catalogue at the budget; requests and answers refused over the budget
  (429, Best Buy's 403 "Over Quota", GraphQL's ``THROTTLED``) from the
  imitation's arrival log, products from the pass's ``stored``.
- **per id**: at the documented budget a 50,000-product refresh takes hours
  (Shopify: 50,000 / 2 a second), so its requests (one per product) and
  seconds (products / the budget's rate, or the crawl's default 500/s where
  no budget is documented) are **computed**; its CPU is measured on
  ``--sample`` ids (an id file of the catalogue's first keys), unthrottled
  (the imitations' per-id endpoints are not budgeted), and on one id (the
  start-up), and given for ``--size`` products: the start-up once, and the
  sample's CPU per product past it for each.
- **incremental 3 %**: a full pass of the ``NAME-incremental`` recipe (the budget
  lifted for it: it only sets the pass the next one follows), then
  ``mutate(changed=0.03, removed=1, added=1)`` and the incremental pass at the
  budget. For GraphQL the first pass lists the first 250 products only (the
  imitation builds every node per page, 2 s a page at 50,000), and
  ``--graphql-size`` sets the catalogue of its full listing (at 50 points a
  second, 50,000 products take 50 minutes).

Prints one JSON line per crawl, then the Markdown table and the headline (a
1,440-product Shopify catalogue by listing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import run_measured

from tests.support.crawls import crawl_command, crawl_env
from tests.support.imitations import bestbuy, bigcommerce, dummyjson, magento, shopify, woocommerce
from tests.support.imitations.served import Served
from tests.support.imitations.shopify_graphql import ShopifyGraphql
from tests.support.recipes import recipe

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.imitations._base import Imitation

#: The crawl's own cap (MAX_REQUESTS_PER_SECOND's default): per id, where no budget is documented.
DEFAULT_RATE = 500.0
UNTHROTTLED = 1_000_000
HEADLINE_SIZE = 1_440


@dataclass
class Vendor:
    name: str
    label: str
    kind: type[Imitation]
    key: str | None
    listing: str
    per_id: str | None
    incremental: str | None
    #: The documented budget of a per-id request (requests a second); None: none documented.
    per_id_rate: float | None
    budget: str
    #: The budget's objects and the attributes to lift for an unmeasured first pass.
    lift: dict[str, dict[str, float]] = field(default_factory=dict)


HUGE = 1e9
VENDORS = {
    "shopify": Vendor("shopify", "Shopify REST", shopify.Shopify, shopify.TOKEN, "shopify-list", "shopify",
                      "shopify-incremental", 2.0, "bucket 40, leaking 2/s", {"bucket": {"size": HUGE, "leak": HUGE}}),
    "bigcommerce": Vendor("bigcommerce", "BigCommerce", bigcommerce.BigCommerce, bigcommerce.TOKEN,
                          "bigcommerce-list", "bigcommerce", "bigcommerce-incremental", 150 / 30, "150 per 30 s",
                          {"window": {"quota": HUGE}}),
    "woocommerce": Vendor("woocommerce", "WooCommerce", woocommerce.WooCommerce,
                          f"{woocommerce.CONSUMER_KEY}:{woocommerce.CONSUMER_SECRET}", "woocommerce-list",
                          "woocommerce", "woocommerce-incremental", None, "none documented"),
    "magento": Vendor("magento", "Magento", magento.Magento, magento.TOKEN, "magento-list", "magento",
                      "magento-incremental", None, "none documented"),
    "bestbuy": Vendor("bestbuy", "Best Buy", bestbuy.BestBuy, bestbuy.API_KEY, "bestbuy-list", "bestbuy", None,
                      5.0, "5/s, 50,000 a day"),
    "dummyjson": Vendor("dummyjson", "DummyJSON", dummyjson.DummyJson, None, "dummyjson-list", "dummyjson", None,
                        200.0, "200/s"),
    "shopify-graphql": Vendor("shopify-graphql", "Shopify GraphQL", ShopifyGraphql, shopify.TOKEN,
                              "shopify-graphql", None, "shopify-graphql-incremental", None,
                              "1,000 points, restoring 50/s", {"points": {"maximum": HUGE, "restore": HUGE}}),
}


def pointed(name: str, url: str) -> dict[str, str]:
    """The recipe ``name`` with its URL's origin replaced by the imitation's."""
    settings = recipe(name)
    for setting in ("PRODUCT_URL", "PRODUCT_LIST_URL"):
        if setting in settings:
            parts = urlsplit(settings[setting])
            settings[setting] = settings[setting].replace(f"{parts.scheme}://{parts.netloc}", url)
    settings.pop("API_KEY", None)  # given in the environment, never on the command line
    return settings


def refused_over_budget(arrival: dict[str, Any]) -> bool:
    cost = arrival.get("cost") or {}
    throttled = bool(cost) and cost.get("actualQueryCost") is None and cost.get("requestedQueryCost", 0) > 0
    return arrival.get("status") in (429, 403) or throttled


def last_pass(database: Path) -> dict[str, Any]:
    connection = sqlite3.connect(database)
    try:
        row = connection.execute("SELECT stored, changed, finished_at IS NOT NULL FROM crawl_passes "
                                 "ORDER BY pass_id DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        row = None
    finally:
        connection.close()
    return {"stored": row[0] or 0, "changed": row[1], "finished": bool(row[2])} if row else {"stored": 0}


@contextmanager
def lifted(imitation: Imitation, lift: dict[str, dict[str, float]]) -> Iterator[None]:
    saved = {name: {attr: getattr(getattr(imitation, name), attr) for attr in attrs} for name, attrs in lift.items()}
    for name, attrs in lift.items():
        for attr, value in attrs.items():
            setattr(getattr(imitation, name), attr, type(saved[name][attr])(value))
    try:
        yield
    finally:
        for name, attrs in saved.items():
            for attr, value in attrs.items():
                setattr(getattr(imitation, name), attr, value)


@contextmanager
def trimmed(imitation: Imitation, keep: int) -> Iterator[None]:
    """The catalogue cut to its first ``keep`` products for a while (the rest put back afterwards)."""
    products, modified = imitation.products, imitation.modified
    first = imitation.ordered()[:keep]
    imitation.products = {key: products[key] for key in first}
    imitation.modified = {key: modified[key] for key in first}
    imitation._order = None
    try:
        yield
    finally:
        imitation.products, imitation.modified, imitation._order = products, modified, None


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.runs = 0

    def crawl(self, api: Served, vendor: Vendor, settings: dict[str, Any], database: Path, label: str,
              *args: str) -> dict[str, Any]:
        """One measured crawl: its CPU and wall time, what the imitation saw, the pass it recorded."""
        self.runs += 1
        api.call(api.imitation.reset)
        env = crawl_env(**({"API_KEY": vendor.key} if vendor.key else {}))
        settings = {**settings, "DATABASE_URL": f"sqlite:///{database}"}
        log = self.work / f"{self.runs:02d}-{vendor.name}-{label}.log"
        run = run_measured(label, crawl_command(*args, settings=settings), env=env, timeout=3600, log_path=log)
        arrivals = api.arrivals()
        result = {"api": vendor.name, "mode": label, "exit": run.returncode, "seconds": round(run.wall, 2),
                  "cpu_s": round(run.cpu, 3), "requests": len(arrivals),
                  "over_budget": sum(refused_over_budget(a) for a in arrivals),
                  "statuses": _count(str(a.get("status")) for a in arrivals), **last_pass(database), "log": str(log)}
        if run.returncode != 0:
            result["tail"] = run.stderr_tail
        print(json.dumps(result), flush=True)
        return result

    def per_id(self, api: Served, vendor: Vendor, sample: int) -> dict[str, Any]:
        """The sample's crawl, and a crawl of one id: its start-up, counted once in the extrapolation."""
        assert vendor.per_id is not None
        runs = []
        for count, label in ((1, "per id (start-up)"), (sample, "per id (sample)")):
            keys = api.call(lambda n=count: list(api.imitation.ordered()[:n]))
            ids = self.work / f"{vendor.name}-ids-{count}.txt"
            ids.write_text("".join(f"{key}\n" for key in keys))
            settings = {**pointed(vendor.per_id, api.url), "PRODUCT_IDS": f"@{ids}",
                        "MAX_REQUESTS_PER_SECOND": UNTHROTTLED}
            runs.append(self.crawl(api, vendor, settings, self.work / f"{vendor.name}-per-id-{count}.db", label))
        one, result = runs
        result["startup_cpu_s"] = one["cpu_s"]
        if result["exit"] != 0 or one["exit"] != 0:
            result["exit"] = result["exit"] or one["exit"]
        return result

    def listing(self, api: Served, vendor: Vendor) -> dict[str, Any]:
        return self.crawl(api, vendor, pointed(vendor.listing, api.url), self.work / f"{vendor.name}-list.db",
                          "listing")

    def incremental(self, api: Served, vendor: Vendor) -> dict[str, Any]:
        assert vendor.incremental is not None
        settings = pointed(vendor.incremental, api.url)
        database = self.work / f"{vendor.name}-incremental.db"
        first_settings = {**settings, "MAX_REQUESTS_PER_SECOND": UNTHROTTLED}
        if vendor.kind is ShopifyGraphql:
            with lifted(api.imitation, vendor.lift), trimmed(api.imitation, 250):
                first = self.crawl(api, vendor, first_settings, database, "first pass (unmeasured)")
        else:
            with lifted(api.imitation, vendor.lift):
                first = self.crawl(api, vendor, first_settings, database, "first pass (unmeasured)")
        if first["exit"] != 0:
            return first
        mutated = api.call(api.imitation.mutate, changed=0.03, removed=1, added=1)
        result = self.crawl(api, vendor, settings, database, "incremental 3 %")
        result["mutated"] = len(mutated["changed"]) + len(mutated["added"])
        return result


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=50_000, help="products per catalogue (default 50,000)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 5,000 products per catalogue, 1,000 for the GraphQL listing")
    parser.add_argument("--apis", default=",".join(VENDORS), help=f"a subset of {','.join(VENDORS)}")
    parser.add_argument("--sample", type=int, default=5_000, help="ids of the measured per-id crawl (default 5,000)")
    parser.add_argument("--graphql-size", type=int, default=5_000,
                        help="products of the GraphQL full listing (default 5,000: about 5 minutes at 50 points/s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    size = 5_000 if args.quick else args.size
    sample = min(args.sample, size)
    graphql_size = min(args.graphql_size, size, 1_000 if args.quick else size)
    chosen = [name.strip() for name in args.apis.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in VENDORS]
    if unknown:
        parser.error(f"unknown API {unknown[0]!r}; one of {', '.join(VENDORS)}")
    work = Path(tempfile.mkdtemp(prefix="bench-listing-"))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs {platform.machine()}, "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}, size {size:,}", flush=True)
    bench = Bench(work)
    results: list[dict[str, Any]] = []
    for name in chosen:
        vendor = VENDORS[name]
        rows: dict[str, Any] = {"vendor": vendor, "size": size}
        with Served(vendor.kind(size=size)) as api:
            if vendor.per_id is not None:
                rows["per_id"] = bench.per_id(api, vendor, sample)
            if vendor.kind is not ShopifyGraphql or graphql_size == size:
                rows["listing"] = bench.listing(api, vendor)
            if vendor.incremental is not None:
                rows["incremental"] = bench.incremental(api, vendor)
        if vendor.kind is ShopifyGraphql and graphql_size != size:
            with Served(vendor.kind(size=graphql_size)) as api:
                rows["listing"] = bench.listing(api, vendor)
                rows["listing_size"] = graphql_size
        results.append(rows)
    headline = None
    if "shopify" in chosen:
        with Served(shopify.Shopify(size=HEADLINE_SIZE)) as api:
            headline = bench.listing(api, VENDORS["shopify"])
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; logs and databases: {work}")
    print()
    print(table(results, size))
    samples = [f"{r['vendor'].label} {r['per_id']['stored']:,} in {r['per_id']['seconds']:.1f} s, "
               f"{r['per_id']['cpu_s']:.1f} s CPU (one id: {r['per_id']['startup_cpu_s']:.1f})"
               for r in results if "per_id" in r]
    if samples:
        print()
        print("Per-id samples, unthrottled: " + "; ".join(samples) + ".")
    if headline is not None:
        print()
        print(f"A {HEADLINE_SIZE:,}-product Shopify catalogue: {headline['requests']} requests by listing "
              f"({headline['stored']:,} stored, {headline['seconds']:.1f} s, {headline['over_budget']} 429s) "
              f"vs {HEADLINE_SIZE:,} per id.")
    if args.json:
        args.json.write_text(json.dumps([{k: v for k, v in r.items() if k != "vendor"} | {"api": r["vendor"].name}
                                         for r in results] + [{"headline": headline}], indent=1))
    return 0


def cpu_per_1000(run: dict[str, Any]) -> str:
    count = run.get("stored") or 0
    return f"{1000 * run['cpu_s'] / count:.2f}" if count else "-"


def per_id_cpu_per_1000(run: dict[str, Any], size: int) -> str:
    """CPU per 1,000 products of a per-id crawl of ``size``: the sample's CPU per product past start-up,
    and the start-up once."""
    stored, startup = run.get("stored") or 0, run["startup_cpu_s"]
    if stored < 2:
        return "-"
    each = (run["cpu_s"] - startup) / (stored - 1)
    return f"{1000 * (startup + each * (size - 1)) / size:.2f}"


def table(results: list[dict[str, Any]], size: int) -> str:
    lines = ["| API (budget) | mode | requests | seconds | products per request | CPU s per 1,000 products | "
             "429 / THROTTLED / over-quota 403 |", "|---|---|---|---|---|---|---|"]
    for rows in results:
        vendor: Vendor = rows["vendor"]
        api = f"{vendor.label} ({vendor.budget})"
        per_id = rows.get("per_id")
        if per_id is not None:
            rate = vendor.per_id_rate or DEFAULT_RATE
            why = f"{rate:g}/s" if vendor.per_id_rate else f"{DEFAULT_RATE:g}/s, the crawl's default cap"
            flag = "" if per_id["exit"] == 0 else f" (exit {per_id['exit']})"
            lines.append(f"| {api} | per id | {size:,} (computed) | {size / rate:,.0f} (computed, {why}) | 1 | "
                         f"{per_id_cpu_per_1000(per_id, size)}{flag} | - |")
        listing = rows.get("listing")
        if listing is not None:
            mode = "listing" if rows.get("listing_size") is None else f"listing, {rows['listing_size']:,} products"
            lines.append(row(api, mode, listing))
        incremental = rows.get("incremental")
        if incremental is not None:
            lines.append(row(api, "incremental 3 %", incremental, per_1000=False))
    return "\n".join(lines)


def row(api: str, mode: str, run: dict[str, Any], per_1000: bool = True) -> str:
    """A measured crawl's row; an incremental pass's CPU is its start-up mostly: given in all, not per product."""
    stored = run.get("stored") or 0
    cpu = cpu_per_1000(run) if per_1000 else f"({run['cpu_s']:.1f} s in all)"
    per_request = f"{stored / run['requests']:.0f}" if run["requests"] else "-"
    flag = "" if run["exit"] == 0 else f" **exit {run['exit']}**"
    return (f"| {api} | {mode}{flag} | {run['requests']:,} | {run['seconds']:.1f} | {per_request} | "
            f"{cpu} | {run['over_budget']} |")


if __name__ == "__main__":
    sys.exit(main())
