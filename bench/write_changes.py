"""Rows written and MariaDB CPU per pass at 3 % changed: this branch's writes, main's, the article's.

Usage (by hand; MariaDB at 127.0.0.1:3306; PostgreSQL: ``write_changes_pg.py``)::

    .venv/bin/python bench/write_changes.py                 # 50,000 products, 3 rounds
    .venv/bin/python bench/write_changes.py --writers ours  # this branch's writer only
    .venv/bin/python bench/write_changes.py --ids 20000 --rounds 1 --changed 3

Method. Each writer gets a fresh database (the project's DDL) and stores a
first pass of ``--ids`` products (not measured), then a second pass in which
``--changed`` % of them have a new price or stock: that pass is measured.
The writers, side by side in one run, in turns (round-robin, so drift hits all):

- ``ours``: this branch's ``write_batch`` (batches of 200 in one transaction
  each, as the pipeline's DATABASE_BATCH_SIZE): compare, then insert new,
  update changed, touch unchanged;
- ``before``: ``write_batch`` as it was before writes compared
  (``git show REF:productcrawler/storage/database.py``, ``--before``, default
  the commit this work started from; run against this branch's dialect and
  items): an upsert of every row, per batch;
- ``article``: the article's crawler's write (bench/aiohttp_crawler.py's
  UPSERT statement): one autocommitted upsert per item.

Rows written are the server's own counters, ``SHOW GLOBAL STATUS``
Handler_write/Handler_update/Handler_delete (an upsert of a stored row counts
one write request and one update) and the bytes of redo log written
(Innodb_os_log_written), before and after the pass (global: anything else the
server does meanwhile is counted too; the idle noise is printed first). MariaDB's CPU is
user+sys of the ``mariadbd`` process from /proc/PID/stat. Only the database
side is measured: the items are built beforehand, no HTTP.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import create_database, drop_database, mysql_connect  # noqa: E402
from productcrawler.items import ProductItem  # noqa: E402
from productcrawler.storage.database import ensure_schema, utcnow  # noqa: E402
from productcrawler.storage.database import write_batch as ours_write_batch  # noqa: E402
from productcrawler.storage.target import MYSQL  # noqa: E402
from simulator import catalog  # noqa: E402

VERSION = 490000
BATCH = 200
#: MariaDB 10.11 has no Innodb_rows_* any more: the handler counters and the redo log's bytes.
STATUS = ("Handler_write", "Handler_update", "Handler_delete", "Innodb_os_log_written")
# bench/aiohttp_crawler.py's statement (that module needs aiomysql to import).
ARTICLE_UPSERT = ("INSERT INTO products (product_id, name, price, stock, category, brand, rating, sales_count, "
                  "update_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                  "name = VALUES(name), price = VALUES(price), stock = VALUES(stock), category = VALUES(category), "
                  "brand = VALUES(brand), rating = VALUES(rating), sales_count = VALUES(sales_count), "
                  "update_time = VALUES(update_time)")
_CENT = Decimal("0.01")


def items(count: int, changed_percent: float, *, changed: bool) -> list[ProductItem]:
    # The second pass is fetched an hour after the first: every row's update_time is new.
    now = utcnow() + timedelta(hours=1 if changed else 0)
    every = round(100 / changed_percent) if changed_percent else 0
    made = []
    for i in range(1, count + 1):
        raw = catalog.product(i, VERSION)
        price = Decimal(repr(raw["price"])).quantize(_CENT)
        stock = raw["stock"]
        if changed and every and i % every == 0:
            if (i // every) % 2:
                price += 1
            else:
                stock += 1
        made.append(ProductItem(i, raw["name"], price, stock, raw["category"], raw["brand"],
                                Decimal(repr(raw["rating"])).quantize(_CENT), raw["sales_count"], now))
    return made


#: The last commit whose write_batch upserted every row.
BEFORE = "30130f5"


def before_write_batch(ref: str) -> Any:
    path = f"{ref}:productcrawler/storage/database.py"
    source = subprocess.run(["git", "show", path], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    module = types.ModuleType("before_storage_database")
    exec(compile(source, path, "exec"), module.__dict__)
    return module.write_batch


def write_batches(write_batch: Any) -> Any:
    def write(connection: Any, products: list[ProductItem], pass_id: int) -> None:
        connection.autocommit(False)  # one transaction per batch, as the pipeline's
        cursor = connection.cursor()
        for start in range(0, len(products), BATCH):
            write_batch(cursor, MYSQL, products[start:start + BATCH], [], pass_id)
            connection.commit()
    return write


def article_write(connection: Any, products: list[ProductItem], pass_id: int) -> None:
    connection.autocommit(True)  # as its aiomysql pool
    cursor = connection.cursor()
    for p in products:
        cursor.execute(ARTICLE_UPSERT, (p.product_id, p.name, p.price, p.stock, p.category, p.brand, p.rating,
                                        p.sales_count, p.update_time))


def mariadb_cpu() -> float:
    pid = subprocess.run(["pidof", "mariadbd"], capture_output=True, text=True, check=True).stdout.split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_status(connection: Any) -> dict[str, int]:
    cursor = connection.cursor()
    cursor.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({', '.join(['%s'] * len(STATUS))})", STATUS)
    return {name: int(value) for name, value in cursor.fetchall()}


def measure(writer: Any, database: str, products: list[ProductItem], monitor: Any) -> dict[str, float]:
    connection = mysql_connect(database)
    status, cpu, began = server_status(monitor), mariadb_cpu(), time.monotonic()
    writer(connection, products, 2)
    seconds = time.monotonic() - began
    after, cpu_after = server_status(monitor), mariadb_cpu()
    connection.close()
    result = {name: after[name] - status[name] for name in STATUS}
    result.update(cpu=cpu_after - cpu, seconds=seconds)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=50_000)
    parser.add_argument("--changed", type=float, default=3.0, help="percent of products changed in pass 2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--writers", default="ours,before,article",
                        help="which writers to run, comma-separated (default all three)")
    args = parser.parse_args()
    chosen = args.writers.split(",")
    writers = {name: make() for name, make in (
        ("ours", lambda: write_batches(ours_write_batch)),
        ("before", lambda: write_batches(before_write_batch(args.before))),
        ("article", lambda: article_write)) if name in chosen}
    first, second = items(args.ids, args.changed, changed=False), items(args.ids, args.changed, changed=True)
    monitor = mysql_connect()
    idle_status, idle_cpu = server_status(monitor), mariadb_cpu()
    time.sleep(5)
    idle = {name: v - idle_status[name] for name, v in server_status(monitor).items()}
    print(f"idle 5 s before the run: MariaDB CPU {mariadb_cpu() - idle_cpu:.2f} s, {idle}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in writers}
    for _ in range(args.rounds):
        for name, writer in writers.items():
            database = create_database(f"bench_wc_{name}")
            try:
                connection = mysql_connect(database)
                ensure_schema(connection.cursor(), MYSQL)
                connection.commit()
                writer(connection, first, 1)
                connection.close()
                results[name].append(measure(writer, database, second, monitor))
            finally:
                drop_database(database)
    print(f"\n{args.ids} products, {args.changed:g} % changed in the measured pass, {args.rounds} round(s); "
          "medians per pass")
    header = ("writer", "Handler_write", "Handler_update", "Handler_delete", "row writes", "redo MB",
              "MariaDB CPU s", "wall s")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    medians = {}
    for name, runs in results.items():
        def median(key: str, runs: list[dict[str, float]] = runs) -> float:
            return sorted(r[key] for r in runs)[len(runs) // 2]
        written = median("Handler_write") + median("Handler_update") + median("Handler_delete")
        medians[name] = (written, median("Innodb_os_log_written"), median("cpu"))
        cells = (name, int(median("Handler_write")), int(median("Handler_update")), int(median("Handler_delete")),
                 int(written), f"{median('Innodb_os_log_written') / 1e6:.1f}", f"{median('cpu'):.2f}",
                 f"{median('seconds'):.1f}")
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if "ours" not in medians:
        return
    ours_written, ours_redo, ours_cpu = medians["ours"]
    for name in (n for n in ("before", "article") if n in medians):
        written, redo, cpu = medians[name]
        print(f"ours / {name}: row writes {ours_written / written:.2f}x, redo {ours_redo / redo:.2f}x, "
              f"MariaDB CPU {ours_cpu / cpu:.2f}x")


if __name__ == "__main__":
    main()
