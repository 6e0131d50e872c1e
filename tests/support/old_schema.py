"""The tables as the crawl created them while product_id was a 32-bit INT: migration fixtures."""

from __future__ import annotations

MYSQL_DDL_INT: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id INT NOT NULL,
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
    product_id INT NOT NULL PRIMARY KEY,
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
    start_id INT NOT NULL,
    end_id INT NOT NULL,
    started_at DATETIME NOT NULL,
    finished_at DATETIME NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
)

SQLITE_DDL_INT: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id INTEGER NOT NULL UNIQUE,
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
    """CREATE INDEX IF NOT EXISTS idx_category ON products (category)""",
    """CREATE INDEX IF NOT EXISTS idx_brand ON products (brand)""",
    """CREATE TABLE IF NOT EXISTS crawl_failures (
    product_id INTEGER NOT NULL PRIMARY KEY,
    outcome VARCHAR(16) NOT NULL,
    http_status SMALLINT NULL,
    reason VARCHAR(255) NOT NULL,
    attempts INTEGER NOT NULL,
    updated_at DATETIME NOT NULL,
    pass_id INTEGER NULL
)""",
    """CREATE INDEX IF NOT EXISTS idx_outcome ON crawl_failures (outcome)""",
    """CREATE TABLE IF NOT EXISTS crawl_passes (
    pass_id INTEGER PRIMARY KEY AUTOINCREMENT,
    start_id INTEGER NOT NULL,
    end_id INTEGER NOT NULL,
    started_at DATETIME NOT NULL,
    finished_at DATETIME NULL
)""",
)


#: The tables as the crawl created them just before 64-bit and string ids: pass summaries,
#: first_seen/removed_at and product_changes, every product_id still a 32-bit INT.
MYSQL_DDL_TODAY: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id INT NOT NULL,
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
    product_id INT NOT NULL PRIMARY KEY,
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
    start_id INT NOT NULL,
    end_id INT NOT NULL,
    started_at DATETIME NOT NULL,
    finished_at DATETIME NULL,
    stored INT NULL,
    missing INT NULL,
    failed INT NULL,
    changed INT NULL,
    removed INT NULL,
    coverage TEXT NULL,
    redis_token VARCHAR(64) NULL,
    UNIQUE KEY uk_redis_token (redis_token)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    """CREATE TABLE IF NOT EXISTS product_changes (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id INT NOT NULL,
    pass_id INT NULL,
    changed_at DATETIME NOT NULL,
    field VARCHAR(64) NOT NULL,
    old_value VARCHAR(255) NULL,
    new_value VARCHAR(255) NULL,
    KEY idx_changes_product (product_id, changed_at),
    KEY idx_changes_pass (pass_id, field)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
)
SQLITE_DDL_TODAY: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id INTEGER NOT NULL UNIQUE,
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
    """CREATE INDEX IF NOT EXISTS idx_category ON products (category)""",
    """CREATE INDEX IF NOT EXISTS idx_brand ON products (brand)""",
    """CREATE TABLE IF NOT EXISTS crawl_failures (
    product_id INTEGER NOT NULL PRIMARY KEY,
    outcome VARCHAR(16) NOT NULL,
    http_status SMALLINT NULL,
    reason VARCHAR(255) NOT NULL,
    attempts INTEGER NOT NULL,
    updated_at DATETIME NOT NULL,
    pass_id INTEGER NULL
)""",
    """CREATE INDEX IF NOT EXISTS idx_outcome ON crawl_failures (outcome)""",
    """CREATE TABLE IF NOT EXISTS crawl_passes (
    pass_id INTEGER PRIMARY KEY AUTOINCREMENT,
    start_id INTEGER NOT NULL,
    end_id INTEGER NOT NULL,
    started_at DATETIME NOT NULL,
    finished_at DATETIME NULL,
    stored INTEGER NULL,
    missing INTEGER NULL,
    failed INTEGER NULL,
    changed INTEGER NULL,
    removed INTEGER NULL,
    coverage TEXT NULL,
    redis_token VARCHAR(64) NULL UNIQUE
)""",
    """CREATE TABLE IF NOT EXISTS product_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id INTEGER NOT NULL,
    pass_id INTEGER NULL,
    changed_at DATETIME NOT NULL,
    field VARCHAR(64) NOT NULL,
    old_value VARCHAR(255) NULL,
    new_value VARCHAR(255) NULL
)""",
    """CREATE INDEX IF NOT EXISTS idx_changes_product ON product_changes (product_id, changed_at)""",
    """CREATE INDEX IF NOT EXISTS idx_changes_pass ON product_changes (pass_id, field)""",
)


#: The tables as the crawl created them before PRODUCT_COLUMNS, raw answers, variants and PostgreSQL
#: (hand-written DDL, 64-bit ids, listing_pages).
MYSQL_DDL_HANDWRITTEN: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id BIGINT NOT NULL,
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
    product_id BIGINT NOT NULL PRIMARY KEY,
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
    UNIQUE KEY uk_redis_token (redis_token)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    """CREATE TABLE IF NOT EXISTS product_changes (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id BIGINT NOT NULL,
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
SQLITE_DDL_HANDWRITTEN: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS products (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id INTEGER NOT NULL UNIQUE,
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
    """CREATE INDEX IF NOT EXISTS idx_category ON products (category)""",
    """CREATE INDEX IF NOT EXISTS idx_brand ON products (brand)""",
    """CREATE TABLE IF NOT EXISTS crawl_failures (
    product_id INTEGER NOT NULL PRIMARY KEY,
    outcome VARCHAR(16) NOT NULL,
    http_status SMALLINT NULL,
    reason VARCHAR(255) NOT NULL,
    attempts INTEGER NOT NULL,
    updated_at DATETIME NOT NULL,
    pass_id INTEGER NULL
)""",
    """CREATE INDEX IF NOT EXISTS idx_outcome ON crawl_failures (outcome)""",
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
    redis_token VARCHAR(64) NULL UNIQUE
)""",
    """CREATE TABLE IF NOT EXISTS product_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    product_id INTEGER NOT NULL,
    pass_id INTEGER NULL,
    changed_at DATETIME NOT NULL,
    field VARCHAR(64) NOT NULL,
    old_value VARCHAR(255) NULL,
    new_value VARCHAR(255) NULL
)""",
    """CREATE INDEX IF NOT EXISTS idx_changes_product ON product_changes (product_id, changed_at)""",
    """CREATE INDEX IF NOT EXISTS idx_changes_pass ON product_changes (pass_id, field)""",
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
