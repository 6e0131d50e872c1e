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
