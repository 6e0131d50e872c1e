"""PostgreSQL specifics: DATABASE_URL's TLS options as libpq's; on a real server, the failed-ids re-run, declared
columns, and product ids widened or made strings in place (``ALTER COLUMN ... TYPE ... USING``)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from productcrawler.config import ConfigError
from productcrawler.items import FAILED, MISSING, FailureItem, ProductItem, VariantItem
from productcrawler.storage.database import DatabaseTarget, ensure_schema, utcnow, write_batch
from tests.support.crawls import run_crawl
from tests.support.imitations.changing_catalogue import CatalogueApi
from tests.support.services import database_query


def kwargs(url: str) -> dict:
    return DatabaseTarget.from_url(url).connect_kwargs


def test_mysqls_tls_options_mean_the_same_for_postgresql(tmp_path):
    ca, cert, key = (tmp_path / name for name in ("ca.pem", "cert.pem", "key.pem"))
    for path in (ca, cert, key):
        path.write_text("-")
    base = "postgresql://crawler:secret@db.internal:5433/shop"
    plain = kwargs(base)
    assert (plain["host"], plain["port"], plain["user"], plain["password"], plain["dbname"]) == (
        "db.internal", 5433, "crawler", "secret", "shop")
    assert "sslmode" not in plain  # libpq's default: TLS when the server offers it
    verified = kwargs(f"{base}?ssl_ca={ca}")
    # The chain and the host name, as MySQL's ssl_ca means (storage/target.py); the chain alone on request.
    assert (verified["sslmode"], verified["sslrootcert"]) == ("verify-full", str(ca))
    assert kwargs(f"{base}?ssl_ca={ca}&ssl_verify_identity=false")["sslmode"] == "verify-ca"
    assert kwargs(f"{base}?ssl_verify_cert=true")["sslrootcert"] == "system"
    client = kwargs(f"{base}?ssl_ca={ca}&ssl_cert={cert}&ssl_key={key}&ssl_key_password=pw")
    assert (client["sslcert"], client["sslkey"], client["sslpassword"]) == (str(cert), str(key), "pw")
    assert kwargs(f"{base}?unix_socket=/run/postgresql/.s.PGSQL.5432")["host"] == "/run/postgresql"
    with pytest.raises(ConfigError, match="DATABASE_URL"):
        DatabaseTarget.from_url(f"{base}?sslmode=disable")  # libpq's own names are not ours: refused


def test_the_failed_ids_of_the_latest_pass_are_fetched_again(postgresql_url):
    target = DatabaseTarget.from_url(postgresql_url)
    connection = target.connect()
    cursor = connection.cursor()
    ensure_schema(cursor, target.dialect)
    at = utcnow()
    cursor.execute("INSERT INTO crawl_passes (start_id, end_id, started_at, finished_at) VALUES (1, 9, %s, %s)",
                   (at, at))
    stored = [ProductItem(i, f"Product {i}", Decimal("1.00"), 1, None, None, None, None, at) for i in (1, 2, 4)]
    write_batch(cursor, target.dialect, stored, [(FailureItem(i, FAILED, 500, "http_500", 3), at) for i in (3, 5)],
                1)
    connection.commit()
    connection.close()
    with CatalogueApi() as api:
        api.put([{"id": i, "name": f"Product {i}", "price": 2.5} for i in range(1, 10)])
        result = run_crawl(settings={"API_BASE_URL": api.base_url, "DATABASE_URL": postgresql_url,
                                     "PRODUCT_IDS": "failed"})
        asked = sorted(a["path"] for a in api.arrivals())
    assert result.returncode == 0, result.stderr[-3000:]
    assert asked == ["/v1/product/3", "/v1/product/5"]
    assert database_query(postgresql_url, "SELECT product_id, price, pass_id FROM products ORDER BY product_id") == [
        (1, Decimal("1.00"), 1), (2, Decimal("1.00"), 1), (3, Decimal("2.50"), 2), (4, Decimal("1.00"), 1),
        (5, Decimal("2.50"), 2)]
    assert database_query(postgresql_url, "SELECT COUNT(*) FROM crawl_failures") == [(0,)]
    assert database_query(postgresql_url, "SELECT pass_id, source_pass_id, stored FROM crawl_passes "
                                          "ORDER BY pass_id") == [(1, None, None), (2, 1, 2)]


def test_a_lost_server_is_a_connection_error_and_bad_data_is_not(postgresql_url, postgres_server):
    import psycopg

    from productcrawler.storage.errors import is_connection_error

    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(host="127.0.0.1", port=postgres_server.port + 1, dbname="x", connect_timeout=2)
    assert is_connection_error(refused.value)
    target = DatabaseTarget.from_url(postgresql_url)
    connection = target.connect()
    ensure_schema(connection.cursor(), target.dialect)
    with pytest.raises(psycopg.Error) as rejected:
        connection.execute("INSERT INTO products (product_id, name, update_time) VALUES (1, NULL, now())")
    assert not is_connection_error(rejected.value)  # a NOT NULL violation: the row, not the server
    connection.rollback()
    [(pid,)] = connection.execute("SELECT pg_backend_pid()").fetchall()
    postgres_server.admin(f"SELECT pg_terminate_backend({pid})")
    with pytest.raises(psycopg.Error) as lost:
        connection.execute("SELECT 1")
    assert is_connection_error(lost.value)
    connection.close()


def test_declared_columns_are_added_to_existing_tables_and_a_changed_type_is_refused(postgresql_url):
    from productcrawler.storage.evolve import sa_connection
    from productcrawler.storage.migrate import refuse_declared_types

    target = DatabaseTarget.from_url(postgresql_url)
    connection = target.connect()
    ensure_schema(connection.cursor(), target.dialect)
    at = utcnow()
    write_batch(connection.cursor(), target.dialect,
                [ProductItem(i, f"Product {i}", Decimal("1.00"), 1, None, None, None, None, at) for i in (1, 2)], [], 1)
    connection.commit()
    declared = (("sku", "text(8)"), ("tags", "json"), ("on_sale", "boolean"), ("seen", "datetime"))
    ensure_schema(connection.cursor(), target.dialect, "int", declared)
    assert database_query(postgresql_url, "SELECT product_id, name, sku, tags, on_sale, seen FROM products "
                                          "ORDER BY product_id") == [
        (1, "Product 1", None, None, None, None), (2, "Product 2", None, None, None, None)]
    with sa_connection(connection, target.dialect) as schema:
        refuse_declared_types(schema, declared)  # the same types: nothing to say
        with pytest.raises(ConfigError, match=r"PRODUCT_COLUMNS declares sku:text\(16\), but products.sku is "
                                              r"VARCHAR\(8\)"):
            refuse_declared_types(schema, (("sku", "text(16)"),))
    connection.close()


ID_TABLES = ("products", "crawl_failures", "product_changes", "product_variants")


def id_types(url: str) -> dict[str, str]:
    return dict(database_query(url, "SELECT table_name, data_type FROM information_schema.columns "
                                    "WHERE column_name = 'product_id' AND table_schema = 'public'"))


def id_rows(url: str) -> dict[str, list[dict]]:
    """Every row of each table with product ids, as {column: value}, in a fixed order."""
    return {table: sorted((row for (row,) in database_query(url, f"SELECT to_jsonb(t) FROM {table} t")),
                          key=lambda row: (row.get("id", 0), str(row["product_id"])))
            for table in ID_TABLES}


def test_32_bit_ids_are_widened_and_integer_ids_become_their_text_with_every_row_kept(postgresql_url):
    target = DatabaseTarget.from_url(postgresql_url)
    connection = target.connect()
    ensure_schema(connection.cursor(), target.dialect)
    # Tables whose ids are 32-bit, as someone may have made them by hand.
    for table in ID_TABLES:
        connection.execute(f"ALTER TABLE {table} ALTER COLUMN product_id TYPE INTEGER")
    connection.execute("ALTER TABLE crawl_passes ALTER COLUMN start_id TYPE INTEGER")
    at = utcnow()
    cursor = connection.cursor()
    cursor.execute("INSERT INTO crawl_passes (start_id, end_id, started_at) VALUES (1, 9, %s)", (at,))
    board = ProductItem(7, "Board", Decimal("10.00"), 5, None, None, None, None, at,
                        variants=[VariantItem("11", "BRD-S", Decimal("10.00"), 5)])
    write_batch(cursor, target.dialect, [board], [(FailureItem(2147483647, MISSING, 404, "not_found", 1), at)], 1)
    board.price, board.variants = Decimal("9.00"), [VariantItem("11", "BRD-S", Decimal("9.00"), 5)]
    write_batch(cursor, target.dialect, [board], [], 1)
    connection.commit()
    before = id_rows(postgresql_url)
    # The product, another id's 404, a price change of the product and one of its variant, the variant.
    assert [len(rows) for rows in before.values()] == [1, 1, 2, 1]
    assert set(id_types(postgresql_url).values()) == {"integer"}

    ensure_schema(connection.cursor(), target.dialect)
    assert id_types(postgresql_url) == dict.fromkeys(ID_TABLES, "bigint")
    assert database_query(postgresql_url, "SELECT data_type FROM information_schema.columns "
                                          "WHERE table_name = 'crawl_passes' AND column_name = 'start_id'") == [
        ("bigint",)]
    assert id_rows(postgresql_url) == before

    ensure_schema(connection.cursor(), target.dialect, "string")
    assert id_types(postgresql_url) == dict.fromkeys(ID_TABLES, "character varying")
    # Each row as it was, its id the decimal text of the number.
    assert id_rows(postgresql_url) == id_rows_as_text(before)
    write_batch(connection.cursor(), target.dialect,
                [ProductItem("SKU-9", "Cap", Decimal("5.00"), 1, None, None, None, None, at)], [], 1)
    connection.commit()
    assert database_query(postgresql_url, "SELECT product_id FROM products ORDER BY product_id") == [
        ("7",), ("SKU-9",)]
    connection.close()


def id_rows_as_text(found: dict[str, list[dict]]) -> dict[str, list[dict]]:
    return {table: [{**row, "product_id": str(row["product_id"])} for row in rows] for table, rows in found.items()}
