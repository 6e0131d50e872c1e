"""Write a batch of products by what changed: insert new ones, update changed ones, touch the rest.

The batch's stored rows are read in one ``SELECT ... WHERE product_id IN
(...)`` inside the batch's transaction (``FOR UPDATE`` on MySQL, so two
instances writing the same id compare against the same row) and compared in
Python, value by value in the column's stored form. Then:

- a new product is inserted, with ``first_seen``; that is not a change;
- a product whose stored values differ is updated whole, and each differing
  tracked column (``TRACK_CHANGES``) gets a ``product_changes`` row;
- an unchanged product costs one narrow ``UPDATE ... SET update_time, pass_id
  WHERE product_id IN (...)`` shared with the batch's other unchanged products
  fetched in the same second: ``update_time`` is when it was last seen, and
  ``pass_id`` is the pass ledger's proof that this pass has it;
- a 404 for a stored product sets ``removed_at`` (change row ``removed``: old
  NULL, new the removal time) and keeps the row; a product answer for a
  removed one clears it (change row ``removed``: old the removal time, new
  NULL) besides its value changes.

Plain functions of a DB-API cursor, run in the caller's transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from productcrawler.storage.schema import ARTICLE_COLUMNS, PASS_COLUMN
from productcrawler.storage.target import SQLITE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime

    from productcrawler.items import ProductItem
    from productcrawler.storage.target import Dialect

#: The product columns whose values a pass compares (not the id, not when it was fetched).
VALUE_COLUMNS: tuple[str, ...] = ARTICLE_COLUMNS[1:-1]
#: The ``field`` of the change rows that say a product was removed or came back.
REMOVED = "removed"
_CHANGE_COLUMNS = ("product_id", PASS_COLUMN, "changed_at", "field", "old_value", "new_value")
#: product_changes keeps values of up to 255 characters (a long JSON value is cut).
_CHANGE_VALUE_MAX = 255


def _decimal_form(scale: int) -> Callable[[Any], str]:
    unit = Decimal(1).scaleb(-scale)
    return lambda value: str(Decimal(str(value)).quantize(unit))


def _json_form(value: Any) -> str:
    # MySQL and SQLite give the text back, PostgreSQL's jsonb a value with its keys reordered.
    decoded = json.loads(value) if isinstance(value, str) else value
    return json.dumps(decoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_FORMS: dict[str, Callable[[Any], str]] = {
    "text": str, "integer": lambda value: str(int(value)), "boolean": lambda value: "1" if value else "0",
    "datetime": lambda value: time_text(value), "json": _json_form}
#: The article's columns' forms; a declared column's is its type's (``column_forms``).
_ARTICLE_FORMS = {"price": _decimal_form(2), "rating": _decimal_form(2), "stock": _FORMS["integer"],
                  "sales_count": _FORMS["integer"]}


def column_forms(declared: tuple[tuple[str, str], ...]) -> dict[str, Callable[[Any], str]]:
    """The stored form of each declared column (name, type spec) that is not plain text."""
    forms = {}
    for name, spec in declared:
        kind, _, sizes = spec.partition("(")
        forms[name] = _decimal_form(int(sizes.rstrip(")").split(",")[1])) if kind == "decimal" else _FORMS[kind]
    return forms


def stored_form(column: str, value: Any, forms: dict[str, Callable[[Any], str]] | None = None) -> str | None:
    """A value as its column stores it, as text: ``7999.00``, ``12``, ``Acme``; None for NULL.

    Both sides of a comparison go through it: an item's Decimal, MySQL's
    Decimal and SQLite's number (its DECIMAL columns keep 7999.00 as 7999).
    ``forms``: the declared columns' (``column_forms``).
    """
    if value is None:
        return None
    form = _ARTICLE_FORMS.get(column) or (forms or {}).get(column, str)
    return form(value)


def _value(item: ProductItem, column: str) -> Any:
    return item.extra.get(column) if column not in _ITEM_FIELDS else getattr(item, column)


_ITEM_FIELDS = frozenset(ARTICLE_COLUMNS)


def time_text(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if hasattr(value, "strftime") else str(value)


@dataclass
class Written:
    """What one batch did to the products table (the crawl's stats)."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    returned: int = 0
    change_rows: int = 0
    #: KEEP_ANSWER: raw answers written (a new product's, or one whose digest changed).
    answers: int = 0


@dataclass
class _Plan:
    inserts: list[ProductItem] = field(default_factory=list)
    updates: list[ProductItem] = field(default_factory=list)
    touches: dict[datetime, list[int | str]] = field(default_factory=dict)
    removals: dict[datetime, list[int | str]] = field(default_factory=dict)
    answers: list[ProductItem] = field(default_factory=list)
    changes: list[tuple[Any, ...]] = field(default_factory=list)


def write_products(cursor: Any, dialect: Dialect, products: list[ProductItem],
                   missing: list[tuple[int | str, datetime]], pass_id: int | None,
                   tracked: Iterable[str], declared: tuple[tuple[str, str], ...] = ()) -> Written:
    """Store ``products`` and mark the stored ones among ``missing`` (id, when) removed.

    ``declared``: the PRODUCT_COLUMNS (name, type), compared and written as the article's are.
    """
    tracked = tuple(tracked)
    columns = (*VALUE_COLUMNS, *(name for name, _ in declared))
    forms = column_forms(declared)
    latest = {item.product_id: item for item in products}  # an id twice in a batch: its last answer
    keep = any(item.answer_digest is not None for item in latest.values())  # KEEP_ANSWER
    stored = _stored_rows(cursor, dialect, [*latest, *(product_id for product_id, _ in missing)], columns, forms,
                          keep)
    plan, written = _Plan(), Written()
    for item in latest.values():
        row = stored.get(item.product_id)
        if row is None:
            plan.inserts.append(item)
            written.new += 1
            written.answers += item.answer_digest is not None
            continue
        if item.answer_digest is not None and item.answer_digest != row["answer_digest"]:
            plan.answers.append(item)
            written.answers += 1
        differing = [c for c in columns if stored_form(c, _value(item, c), forms) != row[c]]
        removed_at = row["removed_at"]
        if removed_at is None and not differing:
            plan.touches.setdefault(item.update_time, []).append(item.product_id)
            written.unchanged += 1
            continue
        plan.updates.append(item)
        if removed_at is not None:
            written.returned += 1
            if tracked:
                plan.changes.append((item.product_id, pass_id, item.update_time, REMOVED,
                                     time_text(removed_at), None))
        if differing:
            written.changed += 1
        plan.changes.extend((item.product_id, pass_id, item.update_time, c, _cut(row[c]),
                             _cut(stored_form(c, _value(item, c), forms))) for c in differing if c in tracked)
    for product_id, at in missing:
        row = stored.get(product_id)
        if row is None or row["removed_at"] is not None or product_id in latest:
            continue
        row["removed_at"] = at  # a second 404 for it in this batch removes nothing more
        plan.removals.setdefault(at, []).append(product_id)
        written.removed += 1
        if tracked:
            plan.changes.append((product_id, pass_id, at, REMOVED, None, time_text(at)))
    _execute(cursor, dialect, plan, pass_id, columns, keep)
    written.change_rows = len(plan.changes)
    return written


def _cut(value: str | None) -> str | None:
    return value if value is None or len(value) <= _CHANGE_VALUE_MAX else value[:_CHANGE_VALUE_MAX]


def _stored_rows(cursor: Any, dialect: Dialect, ids: list[int | str], columns: tuple[str, ...],
                 forms: dict[str, Callable[[Any], str]], keep: bool) -> dict[int | str, dict[str, Any]]:
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    lock = "" if dialect is SQLITE else " FOR UPDATE"
    digest = ", answer_digest" if keep else ""
    cursor.execute(f"SELECT product_id, {', '.join(columns)}, removed_at{digest} FROM products "
                   f"WHERE product_id IN ({dialect.params(len(ids))}){lock}", ids)
    rows: dict[int | str, dict[str, Any]] = {}
    for product_id, *values in cursor.fetchall():
        row: dict[str, Any] = {c: stored_form(c, v, forms) for c, v in zip(columns, values, strict=False)}
        row["removed_at"] = values[len(columns)]
        row["answer_digest"] = values[-1] if keep else None
        rows[product_id if isinstance(product_id, str) else int(product_id)] = row
    return rows


def _execute(cursor: Any, dialect: Dialect, plan: _Plan, pass_id: int | None, columns: tuple[str, ...],
             keep: bool) -> None:
    p = dialect.placeholder
    declared = columns[len(VALUE_COLUMNS):]
    kept = ("answer", "answer_digest") if keep else ()
    if plan.inserts:
        # A row another instance stored meanwhile keeps its own first_seen.
        cursor.executemany(
            dialect.upsert("products", (*ARTICLE_COLUMNS, *declared, *kept, PASS_COLUMN, "first_seen"), "product_id",
                           kept=("first_seen",)),
            dialect.rows([(*(getattr(item, c) for c in ARTICLE_COLUMNS), *(item.extra.get(c) for c in declared),
                           *(getattr(item, c) for c in kept), pass_id, item.update_time) for item in plan.inserts]))
    if plan.answers:
        cursor.executemany(f"UPDATE products SET answer = {p}, answer_digest = {p} WHERE product_id = {p}",
                           dialect.rows([(item.answer, item.answer_digest, item.product_id) for item in plan.answers]))
    if plan.updates:
        assignments = ", ".join(f"{c} = {p}" for c in (*columns, "update_time", PASS_COLUMN))
        cursor.executemany(
            f"UPDATE products SET {assignments}, removed_at = NULL WHERE product_id = {p}",
            dialect.rows([(*(_value(item, c) for c in columns), item.update_time, pass_id,
                           item.product_id) for item in plan.updates]))
    for seen_at, ids in plan.touches.items():
        cursor.execute(f"UPDATE products SET update_time = {p}, {PASS_COLUMN} = {p} "
                       f"WHERE product_id IN ({dialect.params(len(ids))})",
                       [dialect.value(seen_at), pass_id, *ids])
    for removed_at, ids in plan.removals.items():
        cursor.execute(f"UPDATE products SET removed_at = {p} WHERE product_id IN ({dialect.params(len(ids))})",
                       [dialect.value(removed_at), *ids])
    if plan.changes:
        cursor.executemany(f"INSERT INTO product_changes ({', '.join(_CHANGE_COLUMNS)}) "
                           f"VALUES ({dialect.params(len(_CHANGE_COLUMNS))})", dialect.rows(plan.changes))
