CREATE TABLE crawl_failures (
	product_id BIGINT NOT NULL, 
	outcome VARCHAR(16) NOT NULL, 
	http_status SMALLINT, 
	reason VARCHAR(255) NOT NULL, 
	attempts INTEGER NOT NULL, 
	updated_at DATETIME NOT NULL, 
	pass_id INTEGER, 
	PRIMARY KEY (product_id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX idx_outcome ON crawl_failures (outcome);

CREATE TABLE crawl_passes (
	pass_id INTEGER NOT NULL AUTO_INCREMENT, 
	start_id BIGINT NOT NULL, 
	end_id BIGINT NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	ids_digest CHAR(64), 
	ids_count BIGINT, 
	source_pass_id INTEGER, 
	`stored` INTEGER, 
	missing INTEGER, 
	failed INTEGER, 
	changed INTEGER, 
	removed INTEGER, 
	coverage TEXT, 
	redis_token VARCHAR(64), 
	list_since DATETIME, 
	PRIMARY KEY (pass_id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE UNIQUE INDEX uk_redis_token ON crawl_passes (redis_token);

CREATE TABLE listing_pages (
	pass_id INTEGER NOT NULL, 
	page INTEGER NOT NULL, 
	url TEXT NOT NULL, 
	products INTEGER, 
	done_at DATETIME, 
	failure VARCHAR(255), 
	PRIMARY KEY (pass_id, page)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE TABLE product_changes (
	id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, 
	product_id BIGINT NOT NULL, 
	pass_id INTEGER, 
	changed_at DATETIME NOT NULL, 
	field VARCHAR(64) NOT NULL, 
	old_value VARCHAR(255), 
	new_value VARCHAR(255), 
	variant_id VARCHAR(64), 
	PRIMARY KEY (id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX idx_changes_pass ON product_changes (pass_id, field);

CREATE INDEX idx_changes_product ON product_changes (product_id, changed_at);

CREATE TABLE product_variants (
	id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, 
	product_id BIGINT NOT NULL, 
	variant_id VARCHAR(64) NOT NULL, 
	sku VARCHAR(64), 
	price NUMERIC(10, 2), 
	stock INTEGER, 
	update_time DATETIME NOT NULL, 
	pass_id INTEGER, 
	first_seen DATETIME, 
	removed_at DATETIME, 
	PRIMARY KEY (id), 
	CONSTRAINT uk_variant UNIQUE (product_id, variant_id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX idx_variants_sku ON product_variants (sku);

CREATE TABLE products (
	id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, 
	product_id BIGINT NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	price NUMERIC(10, 2), 
	stock INTEGER, 
	category VARCHAR(100), 
	brand VARCHAR(100), 
	rating NUMERIC(3, 2), 
	sales_count INTEGER, 
	update_time DATETIME NOT NULL, 
	created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, 
	pass_id INTEGER, 
	first_seen DATETIME, 
	removed_at DATETIME, 
	answer JSON, 
	answer_digest CHAR(64), 
	PRIMARY KEY (id), 
	CONSTRAINT uk_product_id UNIQUE (product_id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX idx_brand ON products (brand);

CREATE INDEX idx_category ON products (category);

