"""Write products' variants (VARIANTS) by what changed, in their products' transaction.

For each product whose answer had a list of variants, its stored variants are
read (``FOR UPDATE`` where there are row locks) and compared in their stored
form, as ``changes.py`` compares products:

- a new variant is inserted with ``first_seen``;
- a variant whose values differ is updated, and each differing tracked column
  (TRACK_CHANGES) gets a ``product_changes`` row with its ``variant_id``;
- every current variant of those products is stamped with the pass and the time
  (one narrow UPDATE per fetch time, as unchanged products are);
- a stored variant the answer lacks gets ``removed_at`` (change row ``removed``)
  and keeps its row; one that comes back has it cleared (change row ``removed``,
  old the removal time, new NULL).

A product whose answer had no list (``variants`` None) leaves its stored variants as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from productcrawler.storage.changes import REMOVED, column_forms, stored_form, time_text
from productcrawler.storage.schema import PASS_COLUMN
from productcrawler.storage.target import SQLITE

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from productcrawler.items import ProductItem, VariantItem
    from productcrawler.storage.target import Dialect

_OWN = ("sku", "price", "stock")
_CHANGE_COLUMNS = ("product_id", PASS_COLUMN, "changed_at", "field", "old_value", "new_value", "variant_id")


def _value(variant: VariantItem, column: str) -> Any:
    return getattr(variant, column) if column in _OWN else variant.extra.get(column)


def write_variants(cursor: Any, dialect: Dialect, products: list[ProductItem], pass_id: int | None,
                   tracked: tuple[str, ...], declared: tuple[tuple[str, str], ...] = ()) -> int:
    """Store the variants of ``products``; how many change rows were written."""
    owners = {item.product_id: item for item in products if item.variants is not None}
    if not owners:
        return 0
    columns = (*_OWN, *(name for name, _ in declared))
    forms = column_forms(declared)
    stored = _stored(cursor, dialect, list(owners), columns, forms)
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    removals: list[tuple[Any, ...]] = []
    changes: list[tuple[Any, ...]] = []
    stamps: dict[datetime, list[int | str]] = {}
    for product_id, item in owners.items():
        at = item.update_time
        stamps.setdefault(at, []).append(product_id)
        current = set()
        for variant in item.variants or ():
            current.add(variant.variant_id)
            values = tuple(_value(variant, c) for c in columns)
            row = stored.get((product_id, variant.variant_id))
            if row is None:
                inserts.append((product_id, variant.variant_id, *values, at, pass_id, at))
                continue
            differing = [c for c, v in zip(columns, values, strict=True) if stored_form(c, v, forms) != row[c]]
            if not differing and row["removed_at"] is None:
                continue
            updates.append((*values, at, pass_id, product_id, variant.variant_id))
            if row["removed_at"] is not None and tracked:
                changes.append((product_id, pass_id, at, REMOVED, time_text(row["removed_at"]), None,
                                variant.variant_id))
            changes.extend((product_id, pass_id, at, c, row[c], stored_form(c, _value(variant, c), forms),
                            variant.variant_id) for c in differing if c in tracked)
        for (stored_product, variant_id), row in stored.items():
            if stored_product == product_id and variant_id not in current and row["removed_at"] is None:
                removals.append((at, product_id, variant_id))
                if tracked:
                    changes.append((product_id, pass_id, at, REMOVED, None, time_text(at), variant_id))
    _execute(cursor, dialect, columns, pass_id, stamps, inserts, updates, removals, changes)
    return len(changes)


def _stored(cursor: Any, dialect: Dialect, ids: list[int | str], columns: tuple[str, ...],
            forms: dict[str, Callable[[Any], str]]) -> dict[tuple[int | str, str], dict[str, Any]]:
    lock = "" if dialect is SQLITE else " FOR UPDATE"
    cursor.execute(f"SELECT product_id, variant_id, {', '.join(columns)}, removed_at FROM product_variants "
                   f"WHERE product_id IN ({dialect.params(len(ids))}){lock}", ids)
    rows = {}
    for product_id, variant_id, *values, removed_at in cursor.fetchall():
        row: dict[str, Any] = {c: stored_form(c, v, forms) for c, v in zip(columns, values, strict=True)}
        row["removed_at"] = removed_at
        rows[(product_id if isinstance(product_id, str) else int(product_id), str(variant_id))] = row
    return rows


def _execute(cursor: Any, dialect: Dialect, columns: tuple[str, ...], pass_id: int | None,
             stamps: dict[datetime, list[int | str]], inserts: list[tuple[Any, ...]],
             updates: list[tuple[Any, ...]], removals: list[tuple[Any, ...]],
             changes: list[tuple[Any, ...]]) -> None:
    p = dialect.placeholder
    # Removals first: a removed variant keeps the pass that last saw it, as a removed product does.
    if removals:
        cursor.executemany(f"UPDATE product_variants SET removed_at = {p} WHERE product_id = {p} "
                           f"AND variant_id = {p}", dialect.rows(removals))
    for at, ids in stamps.items():
        cursor.execute(f"UPDATE product_variants SET update_time = {p}, {PASS_COLUMN} = {p} "
                       f"WHERE removed_at IS NULL AND product_id IN ({dialect.params(len(ids))})",
                       [dialect.value(at), pass_id, *ids])
    if inserts:
        # A variant another instance stored meanwhile keeps its own first_seen.
        cursor.executemany(dialect.upsert("product_variants", ("product_id", "variant_id", *columns, "update_time",
                                                               PASS_COLUMN, "first_seen"),
                                          ("product_id", "variant_id"), kept=("first_seen",)),
                           dialect.rows(inserts))
    if updates:
        assignments = ", ".join(f"{c} = {p}" for c in (*columns, "update_time", PASS_COLUMN))
        cursor.executemany(f"UPDATE product_variants SET {assignments}, removed_at = NULL "
                           f"WHERE product_id = {p} AND variant_id = {p}", dialect.rows(updates))
    if changes:
        cursor.executemany(f"INSERT INTO product_changes ({', '.join(_CHANGE_COLUMNS)}) "
                           f"VALUES ({dialect.params(len(_CHANGE_COLUMNS))})", dialect.rows(changes))
