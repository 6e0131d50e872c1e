"""Table definitions, kept in code so a deployed egg can create them.

``sql/init.sql`` is this module's MySQL output (``python -m
productcrawler.storage.schema > sql/init.sql``); a test keeps the two equal.
"""

from __future__ import annotations

# The columns the crawl writes (storage/database.py, storage/target.py builds the upserts).
PRODUCT_COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating",
                   "sales_count", "update_time")
FAILURE_COLUMNS = ("product_id", "outcome", "http_status", "reason", "attempts", "updated_at")
#: product_id's column type per PRODUCT_ID_TYPE, in every table that holds one. String ids compare
#: byte for byte (utf8mb4_bin): 'ab-1' and 'AB-1 ' are two SKUs, not one row.
MYSQL_ID_TYPES = {"int": "BIGINT", "string": "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"}
#: SQLite: INTEGER is 64-bit; VARCHAR has TEXT affinity, so '00123' stays '00123'.
SQLITE_ID_TYPES = {"int": "INTEGER", "string": "VARCHAR(64)"}
#: The tables whose product_id takes PRODUCT_ID_TYPE's type.
ID_TABLES = ("products", "crawl_failures", "product_changes")
#: Every row also carries the pass (crawl_passes) that wrote it, database or Redis-shared.
PASS_COLUMN = "pass_id"
#: A pass's counts in crawl_passes, written once the pass is complete (NULL until then).
SUMMARY_COUNTS = ("stored", "missing", "failed", "changed", "removed")

#: Columns added to tables made before them: (table, column, MySQL type, SQLite type, then
#: the statements that index it, if any). A fresh table has them from its CREATE TABLE;
#: ``ensure_schema`` adds the missing ones.
ADDED_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("products", PASS_COLUMN, "INT NULL", "INTEGER NULL"),
    ("crawl_failures", PASS_COLUMN, "INT NULL", "INTEGER NULL"),
    ("products", "first_seen", "DATETIME NULL", "DATETIME NULL"),
    ("products", "removed_at", "DATETIME NULL", "DATETIME NULL"),
    *(("crawl_passes", count, "INT NULL", "INTEGER NULL") for count in SUMMARY_COUNTS),
    ("crawl_passes", "coverage", "TEXT NULL", "TEXT NULL"),
    # The id list of a pass: NULL for a range; a file's SHA-256 and id count; for a pass
    # over the ids recorded failed, the pass whose failed ids it fetches.
    ("crawl_passes", "ids_digest", "CHAR(64) NULL", "CHAR(64) NULL"),
    ("crawl_passes", "ids_count", "BIGINT NULL", "BIGINT NULL"),
    ("crawl_passes", "source_pass_id", "INT NULL", "INTEGER NULL"),
    ("crawl_passes", "redis_token", "VARCHAR(64) NULL", "VARCHAR(64) NULL",
     "CREATE UNIQUE INDEX uk_redis_token ON crawl_passes (redis_token)"),
    # A listing pass's {since}: NULL for a pass that lists everything (docs/listing.md).
    ("crawl_passes", "list_since", "DATETIME NULL", "DATETIME NULL"),
)

# `pass_id` on products and crawl_failures: the pass (crawl_passes) that wrote
# the row, so a pass knows its own rows without comparing timestamps.
# `first_seen`: when the product was first stored; `removed_at`: when the API
# answered 404 for a product it had (NULL again once it answers a product).
# `crawl_passes.redis_token`: the Redis-shared pass the row stands for (NULL:
# a database pass); every instance of that pass finds its row by it.
# `listing_pages`: the pages of a listing pass (PRODUCT_LIST_URL) it knows of, each
# with its URL; `done_at` is set in the transaction that stores the page's products,
# `failure` says why a page ended without them (the listing is then not complete).
# `id` is BIGINT: InnoDB's upsert consumes an auto-increment value on every
# update, so an hourly re-crawl of 50,000 ids would exhaust an INT within years.
_MYSQL_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id {product_id} NOT NULL,
    name VARCHAR(255) NOT NULL,
    price DECIMAL(10,2) NULL,
    stock INT NULL,
    category VARCHAR(100) NULL,
    brand VARCHAR(100) NULL,
    rating DECIMAL(3,2) NULL,
    sales_count INT NULL,
    update_time DATETIME NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    pass_id INT NULL,
    first_seen DATETIME NULL,
    removed_at DATETIME NULL,
    UNIQUE KEY uk_product_id (product_id),
    KEY idx_category (category),
    KEY idx_brand (brand)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    """CREATE TABLE IF NOT EXISTS crawl_failures (
    product_id {product_id} NOT NULL PRIMARY KEY,
    outcome VARCHAR(16) NOT NULL,
    http_status SMALLINT NULL,
    reason VARCHAR(255) NOT NULL,
    attempts INT NOT NULL,
    updated_at DATETIME NOT NULL,
    pass_id INT NULL,
    KEY idx_outcome (outcome)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    """CREATE TABLE IF NOT EXISTS crawl_passes (
    pass_id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    start_id BIGINT NOT NULL,
    end_id BIGINT NOT NULL,
    started_at DATETIME NOT NULL,
    finished_at DATETIME NULL,
    ids_digest CHAR(64) NULL,
    ids_count BIGINT NULL,
    source_pass_id INT NULL,
    stored INT NULL,
    missing INT NULL,
    failed INT NULL,
    changed INT NULL,
    removed INT NULL,
    coverage TEXT NULL,
    redis_token VARCHAR(64) NULL,
    list_since DATETIME NULL,
    UNIQUE KEY uk_redis_token (redis_token)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    """CREATE TABLE IF NOT EXISTS product_changes (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id {product_id} NOT NULL,
    pass_id INT NULL,
    changed_at DATETIME NOT NULL,
    field VARCHAR(64) NOT NULL,
    old_value VARCHAR(255) NULL,
    new_value VARCHAR(255) NULL,
    KEY idx_changes_product (product_id, changed_at),
    KEY idx_changes_pass (pass_id, field)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    """CREATE TABLE IF NOT EXISTS listing_pages (
    pass_id INT NOT NULL,
    page INT NOT NULL,
    url TEXT NOT NULL,
    products INT NULL,
    done_at DATETIME NULL,
    failure VARCHAR(255) NULL,
    PRIMARY KEY (pass_id, page)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
)

_SQLITE_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id {product_id} NOT NULL UNIQUE,
    name VARCHAR(255) NOT NULL,
    price DECIMAL(10,2) NULL,
    stock INTEGER NULL,
    category VARCHAR(100) NULL,
    brand VARCHAR(100) NULL,
    rating DECIMAL(3,2) NULL,
    sales_count INTEGER NULL,
    update_time DATETIME NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    pass_id INTEGER NULL,
    first_seen DATETIME NULL,
    removed_at DATETIME NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_category ON products (category)",
    "CREATE INDEX IF NOT EXISTS idx_brand ON products (brand)",
    """CREATE TABLE IF NOT EXISTS crawl_failures (
    product_id {product_id} NOT NULL PRIMARY KEY,
    outcome VARCHAR(16) NOT NULL,
    http_status SMALLINT NULL,
    reason VARCHAR(255) NOT NULL,
    attempts INTEGER NOT NULL,
    updated_at DATETIME NOT NULL,
    pass_id INTEGER NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_outcome ON crawl_failures (outcome)",
    """CREATE TABLE IF NOT EXISTS crawl_passes (
    pass_id INTEGER PRIMARY KEY AUTOINCREMENT,
    start_id INTEGER NOT NULL,
    end_id INTEGER NOT NULL,
    started_at DATETIME NOT NULL,
    finished_at DATETIME NULL,
    ids_digest CHAR(64) NULL,
    ids_count BIGINT NULL,
    source_pass_id INTEGER NULL,
    stored INTEGER NULL,
    missing INTEGER NULL,
    failed INTEGER NULL,
    changed INTEGER NULL,
    removed INTEGER NULL,
    coverage TEXT NULL,
    redis_token VARCHAR(64) NULL UNIQUE,
    list_since DATETIME NULL
)""",
    """CREATE TABLE IF NOT EXISTS product_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id {product_id} NOT NULL,
    pass_id INTEGER NULL,
    changed_at DATETIME NOT NULL,
    field VARCHAR(64) NOT NULL,
    old_value VARCHAR(255) NULL,
    new_value VARCHAR(255) NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_changes_product ON product_changes (product_id, changed_at)",
    "CREATE INDEX IF NOT EXISTS idx_changes_pass ON product_changes (pass_id, field)",
    """CREATE TABLE IF NOT EXISTS listing_pages (
    pass_id INTEGER NOT NULL,
    page INTEGER NOT NULL,
    url TEXT NOT NULL,
    products INTEGER NULL,
    done_at DATETIME NULL,
    failure VARCHAR(255) NULL,
    PRIMARY KEY (pass_id, page)
)""",
)


def ddl(dialect: str, id_type: str) -> tuple[str, ...]:
    """The CREATE statements of ``dialect`` ("mysql" or "sqlite") for ids of ``id_type``."""
    statements, types = (_MYSQL_DDL, MYSQL_ID_TYPES) if dialect == "mysql" else (_SQLITE_DDL, SQLITE_ID_TYPES)
    return tuple(statement.replace("{product_id}", types[id_type]) for statement in statements)


#: The integer-id forms (sql/init.sql is MYSQL_DDL's).
MYSQL_DDL = ddl("mysql", "int")
SQLITE_DDL = ddl("sqlite", "int")


def mysql_init_sql() -> str:
    return "".join(f"{statement};\n\n" for statement in MYSQL_DDL)


if __name__ == "__main__":
    print(mysql_init_sql(), end="")
