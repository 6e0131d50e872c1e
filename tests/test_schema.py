"""sql/init.sql is the MySQL form of the DDL the crawl runs itself; docs/storage.md names every table and column."""

from __future__ import annotations

from productcrawler.storage.schema import mysql_init_sql, tables
from tests.support.crawls import ROOT
from tests.support.services import mysql_query


def test_init_sql_matches_the_ddl_in_code():
    assert (ROOT / "sql" / "init.sql").read_text() == mysql_init_sql(), \
        "regenerate: python -m productcrawler.storage.schema > sql/init.sql"


def test_init_sql_creates_the_seed_schema(mysql_url):
    import pymysql

    connection = pymysql.connect(host="127.0.0.1", user="root", database=mysql_url.rsplit("/", 1)[1])
    for statement in mysql_init_sql().split(";\n"):
        if statement.strip():
            connection.cursor().execute(statement)
    connection.close()
    columns = {r[0]: r[1] for r in mysql_query(mysql_url, "SELECT column_name, column_type FROM "
                                                          "information_schema.columns WHERE table_schema = "
                                                          "DATABASE() AND table_name = 'products'")}
    assert columns["product_id"] == "bigint(20)" and columns["name"] == "varchar(255)"
    assert columns["price"] == "decimal(10,2)" and columns["rating"] == "decimal(3,2)"
    assert columns["update_time"] == "datetime" and "created_at" in columns
    indexes = {r[0] for r in mysql_query(mysql_url, "SELECT index_name FROM information_schema.statistics "
                                                    "WHERE table_schema = DATABASE() AND table_name = 'products'")}
    assert {"uk_product_id", "idx_category", "idx_brand"} <= indexes


def test_the_storage_page_names_every_table_and_its_columns():
    page = (ROOT / "docs" / "storage.md").read_text()
    for table in tables().sorted_tables:
        [row] = [line for line in page.splitlines() if line.startswith(f"| `{table.name}` |")]
        missing = [column.name for column in table.columns if column.name != "id" and f"`{column.name}`" not in row]
        assert not missing, f"docs/storage.md's row of {table.name} lacks {missing}"
