"""Where the product is in the API's JSON answer: the default shapes, or ``PRODUCT_FIELDS``.

With no ``PRODUCT_FIELDS`` (the defaults, cheap and deterministic):

* The product object is the answer itself if it has an id key (``product_id``
  or ``id``); otherwise the value of the first of ``data``, ``product``,
  ``result``, ``item`` that is a JSON object (one envelope level).
* In that object the id is ``product_id``, else ``id``; the name is ``name``,
  else ``title``; every other column is read under its own name.
* No product object, or one without an id, is not a product. If the answer
  carries an error code (``code``, ``errcode`` or ``error_code`` other than
  0/200/"ok"/"success", or a non-empty ``error``/``errors``), the reason is
  ``error_envelope``, else ``not_a_product``; either way it is a bad response
  (retried, then recorded failed). An envelope whose code says error but that
  does hold a product is a product.

``PRODUCT_FIELDS`` (``column=path,column=path``) names the path of some
columns, from the root of the answer: keys separated by dots, a whole number
indexing a list (``product.variants.0.price``). Columns not named keep the
default rules above, read in the object that holds the mapped id (for
``product_id=data.sku``, in ``data``), or in the default product object when
``product_id`` is not mapped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The columns a payload fills (``update_time`` is when it was fetched, not read).
COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating", "sales_count")
ENVELOPE_KEYS = ("data", "product", "result", "item")
ERROR_CODE_KEYS = ("code", "errcode", "error_code")
_OK_CODES = frozenset({"0", "200", "ok", "success"})
#: Keys tried in order for a column that PRODUCT_FIELDS does not name.
_DEFAULT_KEYS: dict[str, tuple[str, ...]] = {
    **{column: (column,) for column in COLUMNS},
    "product_id": ("product_id", "id"),
    "name": ("name", "title"),
}
DETAIL_MAX_LENGTH = 100
KEYS_SHOWN = 8
PRODUCT_KEYS_SHOWN = 30

#: A value that is not in the payload at all (as opposed to JSON ``null``).
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT", "__slots__": ()})()

_Path = tuple[str, ...]


class BadResponse(Exception):
    """A 200 whose body is not a product; retried like a 5xx, then recorded as failed.

    ``keys`` are the keys the answer did have (for the guard's message).
    """

    def __init__(self, reason: str, detail: str = "", keys: tuple[str, ...] = ()) -> None:
        if len(detail) > DETAIL_MAX_LENGTH:
            detail = detail[: DETAIL_MAX_LENGTH - 1] + "…"
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail
        self.keys = keys

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


@dataclass(frozen=True)
class PayloadShape:
    """The paths named by ``PRODUCT_FIELDS`` (none: the default rules)."""

    paths: tuple[tuple[str, _Path], ...] = ()
    # Precomputed once (__post_init__): per column, its path (from the root) or its default keys.
    _plan: tuple[tuple[str, _Path | None, tuple[str, ...]], ...] = field(init=False, repr=False, compare=False)
    _id_parent: _Path | None = field(init=False, repr=False, compare=False)

    @classmethod
    def parse(cls, raw: object) -> PayloadShape:
        """Parse ``column=path,...`` (or a dict); ``ValueError`` says what is wrong, not with which name."""
        if raw is None:
            return DEFAULT_SHAPE
        if isinstance(raw, dict):
            entries = [(str(k), str(v)) for k, v in raw.items()]
        else:
            text = str(raw).strip()
            if not text:
                return DEFAULT_SHAPE
            entries = []
            for entry in text.split(","):
                column, sep, path = entry.partition("=")
                if not sep:
                    raise ValueError(f"entry {entry.strip()!r} is not column=path")
                entries.append((column, path))
        paths: dict[str, _Path] = {}
        for column, path in entries:
            column, path = column.strip(), path.strip()
            if column not in COLUMNS:
                raise ValueError(f"unknown column {column!r}; columns: {', '.join(COLUMNS)}")
            if column in paths:
                raise ValueError(f"column {column!r} is named twice")
            segments = tuple(path.split("."))
            if not path or any(not s.strip() or s != s.strip() for s in segments):
                raise ValueError(f"{column}={path!r}: the path must be keys separated by dots, "
                                 "e.g. data.pricing.current")
            paths[column] = segments
        return cls(tuple(paths.items()))

    def __post_init__(self) -> None:
        mapped = dict(self.paths)
        id_path = mapped.get("product_id")
        object.__setattr__(self, "_plan", tuple((c, mapped.get(c), _DEFAULT_KEYS[c]) for c in COLUMNS))
        object.__setattr__(self, "_id_parent", None if id_path is None else id_path[:-1])

    def describe(self) -> str:
        """``PRODUCT_FIELDS`` as given (for messages): ``unset`` for the default shape."""
        return ",".join(f"{c}={'.'.join(p)}" for c, p in self.paths) or "unset"

    def extract(self, data: object) -> dict[str, Any]:
        """The raw value of every column (``ABSENT`` if the payload has none).

        Raises ``BadResponse`` when there is no product id: no product here.
        """
        if type(data) is not dict:
            raise BadResponse("not_a_product", f"JSON {type(data).__name__}, not an object")
        product = self._product_object(data)
        values: dict[str, Any] = {}
        for column, path, keys in self._plan:
            if path is not None:
                values[column] = resolve(data, path)
            elif product is None:
                values[column] = ABSENT
            else:
                value = ABSENT
                for key in keys:
                    value = product.get(key, ABSENT)
                    if value is not ABSENT:
                        break
                values[column] = value
        if values["product_id"] is ABSENT:
            raise self._no_product(data, product, "id")
        if values["name"] is ABSENT:
            raise self._no_product(data, product, "name")
        return values

    def keys_of(self, data: object) -> tuple[str, ...]:
        """The keys of the product object in ``data``, nested objects' keys one level down.

        ``{"id": 1, "pricing": {"current": 5}}`` gives ``id, pricing.current``;
        at most ``PRODUCT_KEYS_SHOWN`` of them.
        """
        if type(data) is not dict:
            return ()
        product = self._product_object(data)
        if product is None:
            return ()
        keys: list[str] = []
        for key, value in product.items():
            if type(value) is dict and value:
                keys += (f"{key}.{inner}" for inner in value)
            else:
                keys.append(str(key))
        return tuple(keys[:PRODUCT_KEYS_SHOWN])

    def _product_object(self, data: dict[str, Any]) -> dict[str, Any] | None:
        id_parent = self._id_parent
        if id_parent is not None:
            found = resolve(data, id_parent) if id_parent else data
            return found if type(found) is dict else None
        if "product_id" in data or "id" in data:
            return data
        for key in ENVELOPE_KEYS:
            value = data.get(key)
            if type(value) is dict:
                return value
        return data

    def _no_product(self, data: dict[str, Any], product: dict[str, Any] | None, what: str) -> BadResponse:
        """Why there is no product (the slow path: only for bad answers)."""
        keys = _keys_of(data)
        if product is not None and product is not data:
            keys += tuple(f"{_envelope_key(data, product)}.{k}" for k in _keys_of(product))
        error = _error_code(data)
        if error is not None:
            return BadResponse("error_envelope", f"error {error}", keys)
        return BadResponse("not_a_product", f"no product {what}", keys)


DEFAULT_SHAPE = PayloadShape()


def resolve(node: Any, path: _Path) -> Any:
    for segment in path:
        if type(node) is dict:
            node = node.get(segment, ABSENT)
        elif type(node) is list and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return ABSENT
    return node


def _keys_of(data: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(k) for k in list(data)[:KEYS_SHOWN])


def _envelope_key(data: dict[str, Any], product: dict[str, Any]) -> str:
    return next((str(k) for k, v in data.items() if v is product), "?")


def _error_code(data: dict[str, Any]) -> str | None:
    """The answer's error code or message, if it says it is an error."""
    for key in ERROR_CODE_KEYS:
        if key in data and str(data[key]).strip().lower() not in _OK_CODES:
            message = data.get("msg", data.get("message"))
            return f"{key}={data[key]!r}" + (f" ({message!r})" if message is not None else "")
    for key in ("error", "errors"):
        if data.get(key):
            return f"{key}={data[key]!r}"
    return None
