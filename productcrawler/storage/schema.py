"""Table definitions, kept in code so a deployed egg can create them.

``sql/init.sql`` is this module's MySQL output (``python -m
productcrawler.storage.schema > sql/init.sql``); a test keeps the two equal.
"""

from __future__ import annotations

# The columns the crawl writes (storage/database.py, storage/target.py builds the upserts).
PRODUCT_COLUMNS = ("product_id", "name", "price", "stock", "category", "brand", "rating",
                   "sales_count", "update_time")
FAILURE_COLUMNS = ("product_id", "outcome", "http_status", "reason", "attempts", "updated_at")
#: crawl_passes' columns that say which id list a pass runs over: NULL for a range; a file's
#: SHA-256 and id count; for a pass over the ids recorded failed, the pass whose failed ids it fetches.
PASS_LIST_COLUMNS = (("ids_digest", "CHAR(64) NULL"), ("ids_count", "BIGINT NULL"), ("source_pass_id", "INT NULL"))
#: product_id's column type per PRODUCT_ID_TYPE. String ids compare byte for byte (utf8mb4_bin):
#: 'ab-1' and 'AB-1 ' are two SKUs, not one row.
MYSQL_ID_TYPES = {"int": "BIGINT", "string": "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"}
#: SQLite: INTEGER is 64-bit; VARCHAR has TEXT affinity, so '00123' stays '00123'.
SQLITE_ID_TYPES = {"int": "INTEGER", "string": "VARCHAR(64)"}
#: Every row also carries the pass that wrote it (NULL: a Redis-shared pass, which keeps its ledger in Redis).
PASS_COLUMN = "pass_id"

# `pass_id` on products and crawl_failures: the pass (crawl_passes) that wrote
# the row, so a pass knows its own rows without comparing timestamps.
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
    source_pass_id INT NULL
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
    pass_id INTEGER NULL
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
    source_pass_id INTEGER NULL
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
