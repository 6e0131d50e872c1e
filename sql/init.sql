CREATE TABLE IF NOT EXISTS products (
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
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS crawl_failures (
    product_id BIGINT NOT NULL PRIMARY KEY,
    outcome VARCHAR(16) NOT NULL,
    http_status SMALLINT NULL,
    reason VARCHAR(255) NOT NULL,
    attempts INT NOT NULL,
    updated_at DATETIME NOT NULL,
    pass_id INT NULL,
    KEY idx_outcome (outcome)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS crawl_passes (
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
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS product_changes (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    product_id BIGINT NOT NULL,
    pass_id INT NULL,
    changed_at DATETIME NOT NULL,
    field VARCHAR(64) NOT NULL,
    old_value VARCHAR(255) NULL,
    new_value VARCHAR(255) NULL,
    KEY idx_changes_product (product_id, changed_at),
    KEY idx_changes_pass (pass_id, field)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS listing_pages (
    pass_id INT NOT NULL,
    page INT NOT NULL,
    url TEXT NOT NULL,
    products INT NULL,
    done_at DATETIME NULL,
    failure VARCHAR(255) NULL,
    PRIMARY KEY (pass_id, page)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

