"""Bad configuration: a non-zero exit within seconds and one clear message, secrets masked."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from productcrawler.config import ConfigError, CrawlConfig, mask_url
from productcrawler.config.values import ambiguous_userinfo
from productcrawler.storage.target import DatabaseTarget
from tests.support.crawls import ROOT, crawl_env, run_crawl

SECRET = "s3cr3t-pw"

# (settings, spider args, environment, words the message must contain)
BAD = [
    ({"PRODUCT_ID_START": "abc"}, (), {}, ["PRODUCT_ID_START", "'abc'", "not an integer"]),
    ({"PRODUCT_ID_END": "1e3x"}, (), {}, ["PRODUCT_ID_END", "'1e3x'"]),
    ({"PRODUCT_ID_START": "0"}, (), {}, ["PRODUCT_ID_START", "at least 1"]),
    ({"PRODUCT_ID_START": "100", "PRODUCT_ID_END": "50"}, (), {}, ["PRODUCT_ID_START=100", "PRODUCT_ID_END=50"]),
    ({}, ("-a", "start_id=10", "-a", "end_id=5"), {}, ["start_id", "10", "end_id", "5", "greater than"]),
    # product_id is a 32-bit INT in both tables: a larger id could never be stored.
    ({}, ("-a", "end_id=9223372036854775808"), {}, ["end_id", "9223372036854775808", "at most 9223372036854775807"]),
    ({}, ("-a", "start_id=x"), {}, ["start_id", "'x'", "not an integer"]),
    ({"MAX_REQUESTS_PER_SECOND": "0"}, (), {}, ["MAX_REQUESTS_PER_SECOND", "'0'", "greater than 0"]),
    ({"MAX_REQUESTS_PER_SECOND": "-5"}, (), {}, ["MAX_REQUESTS_PER_SECOND", "'-5'"]),
    ({"MAX_REQUESTS_PER_SECOND": "fast"}, (), {}, ["MAX_REQUESTS_PER_SECOND", "'fast'", "not a number"]),
    ({"MAX_REQUESTS_PER_SECOND": "nan"}, (), {}, ["MAX_REQUESTS_PER_SECOND", "'nan'"]),
    ({"API_TIMEOUT": "0"}, (), {}, ["API_TIMEOUT", "'0'"]),
    ({"API_TIMEOUT": "soon"}, (), {}, ["API_TIMEOUT", "'soon'"]),
    ({"API_TLS_VERIFY": "maybe"}, (), {}, ["API_TLS_VERIFY", "'maybe'", "boolean"]),
    ({}, (), {"API_CA_FILE": "/nonexistent/ca.pem"}, ["API_CA_FILE", "'/nonexistent/ca.pem'", "not a readable file"]),
    ({"MAX_RETRIES": "-1"}, (), {}, ["MAX_RETRIES", "'-1'", "at least 0"]),
    ({"MAX_RETRIES": "two"}, (), {}, ["MAX_RETRIES", "'two'"]),
    ({"API_BASE_URL": "ftp://example.test/v1"}, (), {}, ["API_BASE_URL", "ftp://example.test/v1", "http"]),
    ({"DATABASE_URL": "oracle://u:" + SECRET + "@127.0.0.1/db"}, (), {},
     ["DATABASE_URL", "oracle://u:***@127.0.0.1/db", "unknown scheme"]),
    ({"DATABASE_URL": "mysql://root:" + SECRET + "@127.0.0.1:1/db"}, (), {},
     ["DATABASE_URL", "mysql://root:***@127.0.0.1:1/db", "cannot use the database"]),
    ({"DATABASE_URL": "mysql://nobody:" + SECRET + "@127.0.0.1:3306/db"}, (), {},
     ["DATABASE_URL", "nobody:***@", "Access denied"]),
    ({"DATABASE_URL": "mysql://root@127.0.0.1:3306"}, (), {}, ["DATABASE_URL", "database name"]),
    # An "@" in an option's value ends no userinfo: the host stays readable, the option is what is wrong.
    ({"DATABASE_URL": "mysql://root:" + SECRET + "@127.0.0.1:3306/shop?ssl_ca=/no/such/ca@2026.pem"}, (), {},
     ["DATABASE_URL", "'mysql://root:***@127.0.0.1:3306/shop?ssl_ca=/no/such/ca@2026.pem'",
      "option ssl_ca='/no/such/ca@2026.pem' is not a readable file"]),
    ({"DATABASE_URL": "sqlite:///"}, (), {}, ["DATABASE_URL", "sqlite:///"]),
    ({"DATABASE_URL": "sqlite:////proc/no/such/dir/x.db"}, (), {}, ["DATABASE_URL", "cannot use the database"]),
    ({"REDIS_URL": "redis://127.0.0.1:1/0"}, (), {}, ["REDIS_URL", "redis://127.0.0.1:1/0", "cannot reach Redis"]),
    ({"REDIS_URL": "redis://:" + SECRET + "@127.0.0.1:1/0"}, (), {}, ["REDIS_URL", ":***@127.0.0.1:1", "cannot reach"]),
    ({"REDIS_URL": "http://127.0.0.1:6379"}, (), {}, ["REDIS_URL", "unknown scheme"]),
    # redis-py would quietly use database 0 for a path that is not a number.
    ({"REDIS_URL": "redis://127.0.0.1:6379/abc"}, (), {},
     ["REDIS_URL", "'redis://127.0.0.1:6379/abc'", "the database (the path after the host) must be a whole number"]),
    ({}, (), {"DATABASE_URL": "oracle://scott:" + SECRET + "@db/x"}, ["DATABASE_URL", "scott:***@", "unknown scheme"]),
    ({}, (), {"MAX_REQUESTS_PER_SECOND": "0"}, ["MAX_REQUESTS_PER_SECOND", "'0'"]),
    ({"PRODUCT_FIELDS": "sku=data.sku"}, (), {}, ["PRODUCT_FIELDS", "'sku=data.sku'", "unknown column 'sku'"]),
    ({"PRODUCT_FIELDS": "product_id="}, (), {}, ["PRODUCT_FIELDS", "'product_id='", "the path must be"]),
    ({"PRODUCT_FIELDS": "name=data..title"}, (), {}, ["PRODUCT_FIELDS", "data..title", "the path must be"]),
    ({"PRODUCT_FIELDS": "product_id:data.sku"}, (), {}, ["PRODUCT_FIELDS", "not column=path"]),
    ({}, (), {"PRODUCT_FIELDS": "name=a,name=b"}, ["PRODUCT_FIELDS", "'name=a,name=b'", "named twice"]),
    ({"GUARD_404_STREAK": "-1"}, (), {}, ["GUARD_404_STREAK", "'-1'", "at least 0"]),
    # No longer than the heartbeat interval: a live instance would count as dead between two beats.
    ({"REDIS_HEARTBEAT_TTL": "2"}, (), {}, ["REDIS_HEARTBEAT_TTL", "'2'", "greater than 2", "heartbeats"]),
    ({}, (), {"GUARD_NO_ANSWERS": "-1"}, ["GUARD_NO_ANSWERS", "'-1'", "at least 0"]),
    ({"GUARD_FIELD_DRIFT": "5"}, (), {}, ["GUARD_FIELD_DRIFT", "'5'", "0 (off) or at least 20"]),
    ({}, (), {"GUARD_FIELD_DRIFT": "lots"}, ["GUARD_FIELD_DRIFT", "'lots'", "not an integer"]),
    ({"PUSHGATEWAY_URL": "ftp://gateway:9091"}, (), {}, ["PUSHGATEWAY_URL", "not an http:// or https:// URL"]),
    ({"PUSHGATEWAY_URL": "http://push:" + SECRET + "@127.0.0.1:99999"}, (), {},
     ["PUSHGATEWAY_URL", "push:***@127.0.0.1:99999", "invalid port"]),
    ({"PUSHGATEWAY_URL": "http://127.0.0.1:9091/?job=x"}, (), {}, ["PUSHGATEWAY_URL", "query"]),
    # Credentials in the API's URL: they would be in every DEBUG Crawled line.
    ({}, (), {"PRODUCT_URL": "https://shop:" + SECRET + "@shop.test/p/{id}.json"},
     ["PRODUCT_URL", "shop:***@shop.test", "use API_AUTH=basic"]),
    ({}, (), {"API_BASE_URL": "https://shop:" + SECRET + "@shop.test/v1"},
     ["API_BASE_URL", "shop:***@shop.test", "use API_AUTH=basic"]),
    ({}, (), {"PRODUCT_LIST_URL": "https://shop:" + SECRET + "@shop.test/admin/products.json"},
     ["PRODUCT_LIST_URL", "shop:***@shop.test", "use API_AUTH=basic"]),
    ({"VARIANTS": "product.variants", "VARIANT_FIELDS": "sku=sku,price=price"}, (), {},
     ["VARIANT_FIELDS must map variant_id (e.g. variant_id=id)"]),
    # A component's own setting, read by the start-up checks too.
    ({"RATE_LIMIT_ENABLED": "maybe"}, (), {}, ["RATE_LIMIT_ENABLED", "'maybe'", "not a boolean"]),
    # Refused before the download handler exists: refused by the rate limit's
    # middleware while the crawler is built, it left an aiohttp session open
    # behind the message ("ERROR: Unclosed client session").
    ({"DOWNLOAD_HANDLERS": '{"http": "productcrawler.ratelimit.handler.PacedAiohttpDownloadHandler", '
                           '"https": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"}'}, (), {},
     ["DOWNLOAD_HANDLERS['https']", "HTTP11DownloadHandler", "PacedAiohttpDownloadHandler"]),
    # Refused by a component while the crawler is built.
    ({"GC_GEN0_THRESHOLD": "-5"}, (), {}, ["GC_GEN0_THRESHOLD", "'-5'", "positive whole number"]),
]


@pytest.mark.parametrize(("settings", "args", "environment", "words"), BAD,
                         ids=[f"{i}-{next(iter(s or e or {'args': 0}))}" for i, (s, _, e, _w) in enumerate(BAD)])
def test_bad_configuration_exits_at_once_with_one_clear_message(tmp_path, settings, args, environment, words):
    settings = {"DATABASE_URL": f"sqlite:///{tmp_path}/x.db", **settings}
    if "DATABASE_URL" in environment:
        settings.pop("DATABASE_URL")
    result = run_crawl(*args, settings=settings, env=crawl_env(**environment), timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    # At once: before the spider opens (a crawl that started would log these first).
    assert "Spider opened" not in result.stderr and "Rate limit:" not in result.stderr, result.stderr[-2000:]
    # Scrapy's start-up banner may precede it; the error itself is one line.
    lines = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("productcrawler: configuration error: ")
    for word in words:
        assert word in lines[0]
    assert SECRET not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_a_metrics_port_in_use_exits_2_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_crawl(settings={"DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "METRICS_PORT": port},
                           timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"productcrawler: configuration error: METRICS_PORT={port}: cannot listen" in result.stderr
    assert "Traceback" not in result.stderr


def test_any_other_start_up_failure_exits_1_and_shows_its_error(tmp_path):
    result = run_crawl(settings={"DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
                                 "EXTENSIONS": '{"productcrawler.no_such_module.Extension": 1}'}, timeout=60)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "ModuleNotFoundError: No module named 'productcrawler.no_such_module'" in result.stderr
    assert "configuration error" not in result.stderr


def test_a_setting_given_explicitly_wins_over_the_environment(tmp_path):
    result = run_crawl("-a", "end_id=1", settings={"DATABASE_URL": "oracle://nowhere/x",
                                                    "MAX_REQUESTS_PER_SECOND": "5"},
                       env=crawl_env(DATABASE_URL=f"sqlite:///{tmp_path}/x.db", MAX_REQUESTS_PER_SECOND="0"))
    assert result.returncode == 2
    assert "oracle://nowhere/x" in result.stderr
    assert "MAX_REQUESTS_PER_SECOND" not in result.stderr


@pytest.mark.parametrize(("settings", "says"), [
    # The key itself refused: the message names API_KEY and why, never the key.
    ({"API_KEY": f"{SECRET}\nX-Injected: 1"}, "API_KEY holds a control character"),
    ({"API_AUTH": "basic", "API_KEY": f"{SECRET}-no-colon"}, "API_KEY must be user:password with API_AUTH=basic"),
    # The key pasted into API_AUTH, which the message quotes: every piece of the key masked.
    ({"API_AUTH": f"Bearer {SECRET}", "API_KEY": SECRET}, "API_AUTH='Bearer ***' is not one of"),
    ({"API_AUTH": f"header:{SECRET}:x", "API_KEY": SECRET}, "API_AUTH='header:***:x' is not one of"),
    # Only the password of a user:password key pasted: that piece masked on its own.
    ({"API_AUTH": f"basic:{SECRET}", "API_KEY": f"alice:{SECRET}"}, "API_AUTH='basic:***' is not one of"),
])
def test_an_api_key_is_never_shown(tmp_path, settings, says):
    result = run_crawl(settings={"DATABASE_URL": f"sqlite:///{tmp_path}/x.db", **settings}, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert says in result.stderr, result.stderr[-2000:]
    for piece in (SECRET, SECRET[:5], SECRET[-5:]):
        assert piece not in result.stderr + result.stdout


@pytest.mark.parametrize(("url", "shown"), [
    ("mysql://root:pw@host:3306/db", "mysql://root:***@host:3306/db"),
    ("mysql://root@host/db", "mysql://root@host/db"),
    ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
    ("mysql://u:p%40ss@host/db", "mysql://u:***@host/db"),
    (None, None),
])
def test_mask_url_hides_passwords(url, shown):
    assert mask_url(url) == shown


@pytest.mark.parametrize("password", [
    "pa?ss#word", "pa#ss", "p@ss", "pa/ss", "pa:ss", "p@ss/w#rd?x", "?", "#", "@", "/", ":", "@@", "?@/#:",
    "pa%3Fss%23word%40", "x?ssl_ca=/ca.pem", "/shop?ssl_ca=/ca.pem#",
])
def test_mask_url_shows_no_part_of_a_password_whatever_it_contains(password):
    """Unencoded, ``?#/@`` make the URL ambiguous: its userinfo ends at the last ``@`` before the host."""
    url = f"mysql://u:{password}@db.internal:3306/shop?ssl_key_password=kp"
    assert mask_url(url) == "mysql://u:***@db.internal:3306/shop?ssl_key_password=***"
    assert mask_url(f"redis://:{password}@r.internal:6379/0") == "redis://:***@r.internal:6379/0"


def test_mask_url_hides_a_password_that_reads_as_a_query_whole():
    # Read as urlsplit and the drivers read it, "c" is an unknown option and all after "c=" its value;
    # read as meant, "a=b?c=d" is the password. Either way it is a secret, so all of it is hidden.
    assert mask_url("mysql://u:a=b?c=d@db/shop?ssl_ca=/ca.pem") == "mysql://u:***"


@pytest.mark.parametrize(("url", "masked"), [
    # The password "123?ssl_ca=/x" reads as host "user", port 123 and an option; the "@" a host
    # follows ends it all the same.
    ("mysql://user:123?ssl_ca=/x@host:3306/db", "mysql://user:***@host:3306/db"),
    ("mysql://user:99?ssl_key_password=zz@host/db", "mysql://user:***"),
])
def test_a_password_that_reads_as_host_port_and_an_option_is_hidden(url, masked):
    assert mask_url(url) == masked
    assert ambiguous_userinfo(url)


@pytest.mark.parametrize("url", [
    "mysql://u:***@db.internal:3306/shop?ssl_ca=/etc/ssl/ca@2026.pem",
    "mysql://db.internal:3306/shop?ssl_ca=/etc/ssl/ca@2026.pem&ssl_verify_identity=true",
    "rediss://:***@r.internal:6380/0?ssl_ca_certs=/etc/ssl/ca@2026.pem",
    "mysql://u@db.internal/shop?unix_socket=/run/a@b.sock",
])
def test_an_at_sign_in_an_options_value_leaves_the_host_and_the_option_readable(url):
    """Only the authority (up to the first / ? #) holds a userinfo when it reads as [userinfo@]host[:port]."""
    assert mask_url(url.replace("***", "pw")) == url


@pytest.mark.parametrize(("name", "url"), [
    ("DATABASE_URL", "mysql://u:pw@db.internal:3306/shop?ssl_ca=/no/such/ca@2026.pem"),
    ("REDIS_URL", "rediss://:pw@r.internal:6380/0?ssl_ca_certs=/no/such/ca@2026.pem"),
])
def test_an_at_sign_in_an_options_value_is_an_option_error_not_a_password_one(name, url):
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings({name: url})
    message = str(error.value)
    assert f"{url.replace(':pw@', ':***@')!r}" in message and "'/no/such/ca@2026.pem' is not a readable file" in message
    assert "percent-encode" not in message and "pw" not in message


@pytest.mark.parametrize("userinfo", ["u:pw@", "u@", ""])
def test_an_at_sign_in_a_secret_options_value_does_not_end_the_userinfo_there(userinfo):
    # Ending the userinfo at the URL's last "@" regardless would show what follows it.
    shown = mask_url(f"mysql://{userinfo}db/shop?ssl_key_password=kp@{SECRET}")
    assert "kp" not in shown and SECRET not in shown and "pw" not in shown


def test_a_database_targets_repr_shows_the_masked_url_and_no_secret():
    target = DatabaseTarget.from_url(f"mysql://u:{SECRET}@db.internal:3306/shop?ssl_key_password={SECRET}")
    assert repr(target) == "DatabaseTarget(mysql://u:***@db.internal:3306/shop?ssl_key_password=***)"
    assert SECRET not in f"{target} {[target]}"  # str(), and inside a container's repr


def test_defaults_are_valid():
    from scrapy.settings import Settings

    config = CrawlConfig.from_settings(Settings())
    assert (config.ids.start_id, config.ids.end_id, config.rate.max_requests_per_second,
            config.retry.max_retries) == (1, 50000, 500.0, 3)
    assert config.storage.database_url == "sqlite:///data/products.db" and config.redis.url is None
    assert config.api.timeout == 30.0 and config.api.key is None
    assert config.redis.heartbeat_ttl == 10.0


@pytest.mark.parametrize(("value", "message"), [
    ("1", "REDIS_HEARTBEAT_TTL='1' must be greater than 2, the seconds between an instance's heartbeats"),
    ("2.0", "REDIS_HEARTBEAT_TTL='2.0' must be greater than 2"),
    ("soon", "REDIS_HEARTBEAT_TTL='soon' is not a number"),
    ("inf", "REDIS_HEARTBEAT_TTL='inf' must be at most 86400"),
])
def test_a_heartbeat_ttl_not_above_the_heartbeat_interval_is_refused(value, message):
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings({"REDIS_HEARTBEAT_TTL": value})
    assert str(error.value).startswith(message), error.value


VARIANTS = {"VARIANTS": "product.variants", "VARIANT_FIELDS": "variant_id=id,price=price"}


@pytest.mark.parametrize(("settings", "message"), [
    ({"VARIANTS": "product.variants", "VARIANT_FIELDS": "sku=sku,price=price"},
     "VARIANT_FIELDS must map variant_id (e.g. variant_id=id)"),
    ({"VARIANTS": "product.variants"}, "VARIANT_FIELDS must map variant_id"),
    ({"VARIANT_FIELDS": "variant_id=id"}, "VARIANT_FIELDS is set but VARIANTS is not: name the list of variants"),
    # Without variants there is nothing to derive from: said, not ignored.
    ({"PRODUCT_PRICE_FROM_VARIANTS": "min"}, "PRODUCT_PRICE_FROM_VARIANTS is set but VARIANTS is not"),
    ({"PRODUCT_STOCK_FROM_VARIANTS": "sum"}, "PRODUCT_STOCK_FROM_VARIANTS is set but VARIANTS is not"),
    ({**VARIANTS, "PRODUCT_PRICE_FROM_VARIANTS": "avg"}, "PRODUCT_PRICE_FROM_VARIANTS='avg' must be min or max"),
    ({**VARIANTS, "PRODUCT_PRICE_FROM_VARIANTS": "lowest"}, "PRODUCT_PRICE_FROM_VARIANTS='lowest' must be min or max"),
    ({**VARIANTS, "PRODUCT_STOCK_FROM_VARIANTS": "max"}, "PRODUCT_STOCK_FROM_VARIANTS='max' must be sum"),
    ({**VARIANTS, "VARIANT_FIELDS": "variant_id=id,variant_id=sku"},
     "VARIANT_FIELDS: column 'variant_id' is named twice"),
    ({**VARIANTS, "VARIANT_FIELDS": "variant_id=id,product_id:integer=x"},
     "VARIANT_FIELDS: column 'product_id' is one of the crawl's own"),
    ({**VARIANTS, "VARIANTS": "product..variants"}, "VARIANTS='product..variants': the path must be keys separated"),
])
def test_the_variants_settings_are_refused_naming_what_is_wrong(settings, message):
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings(settings)
    assert str(error.value).startswith(message), error.value


@pytest.mark.parametrize(("price", "stock", "read"), [("min", "sum", ("min", "sum")), ("max", None, ("max", None)),
                                                      (" MAX ", "", ("max", None)), ("", "SUM", (None, "sum"))])
def test_the_variants_derivations_are_read_in_any_case(price, stock, read):
    settings = {**VARIANTS, "PRODUCT_PRICE_FROM_VARIANTS": price, "PRODUCT_STOCK_FROM_VARIANTS": stock}
    shape = CrawlConfig.from_settings({k: v for k, v in settings.items() if v is not None}).answer.variants
    assert (shape.price_from, shape.stock_from) == read


def test_a_heartbeat_ttl_above_the_interval_is_taken_as_given():
    assert CrawlConfig.from_settings({"REDIS_HEARTBEAT_TTL": "2.5"}).redis.heartbeat_ttl == 2.5


def test_a_configurations_repr_shows_no_secret():
    """A config in a log line, a debugger or a test failure: passwords, secret options, the key hidden."""
    config = CrawlConfig.from_settings({
        "API_KEY": f"{SECRET}-key",
        "API_BASE_URL": "https://api.test/v1",
        "DATABASE_URL": f"mysql://root:{SECRET}-db@db.internal:3306/shop?ssl_key_password={SECRET}-tls",
        "REDIS_URL": f"rediss://user:{SECRET}-redis@redis.internal:6380/0",
    })
    for shown in (repr(config), str(config)):
        assert SECRET not in shown
        # Still says where it points, and that a key is set.
        for part in ("api.test/v1", "root:***@db.internal:3306/shop", "user:***@redis.internal:6380/0",
                     "api_key='***'", "end_id="):
            assert part in shown, shown
    assert "api_key=None" in repr(CrawlConfig.from_settings({}))  # unset, said so


HINT = "; if the password contains ? # / or @, percent-encode it (e.g. ? as %3F)"


@pytest.mark.parametrize(("name", "url", "says"), [
    # The password read as options: their names are pieces of it, so none is named.
    ("DATABASE_URL", "mysql://u:Zq?Xv#Kw@db.internal/shop", "has query options that cannot be read"),
    ("DATABASE_URL", "mysql://u:Zq/Xv@db.internal/shop", "has a port that is not a number"),
    ("DATABASE_URL", "mysql://u:Zq#Xv@db.internal/shop", "needs a host and a database name"),
    ("REDIS_URL", "redis://:Zq?Xv@r.internal:6379/0", "has a port that is not a number"),
    ("REDIS_URL", "rediss://u:Zq/Xv@r.internal:6380/0", "has a port that is not a number"),
])
def test_a_url_whose_password_holds_an_unencoded_delimiter_is_refused_with_a_hint(name, url, says):
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings({name: url})
    message = str(error.value)
    assert message.startswith(f"{name}=") and says in message and message.endswith(HINT), message
    detail = message.removesuffix(HINT)
    assert not any(piece in detail for piece in ("Zq", "Xv", "Kw")), message  # no part of the password


@pytest.mark.parametrize(("name", "url"), [
    ("DATABASE_URL", "mysql://u:pw@db.internal:33o6/shop"),
    ("DATABASE_URL", "mysql://u:pw@db.internal/shop?ssl_ka=/k.pem"),
    ("REDIS_URL", "redis://:pw@r.internal:6379/0?db=x"),
])
def test_a_bad_url_with_a_plain_password_gets_no_hint(name, url):
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings({name: url})
    assert "percent-encode" not in str(error.value)


def test_a_database_target_built_from_such_a_url_says_so_without_quoting_it():
    # urlsplit's own error would quote the "port", a piece of the password.
    with pytest.raises(ConfigError) as error:
        DatabaseTarget.from_url(f"mysql://u:pa/{SECRET}@db.internal/shop")
    assert str(error.value) == f"DATABASE_URL='mysql://u:***@db.internal/shop' cannot be read{HINT}"


def test_a_password_that_leaves_a_host_to_try_fails_to_connect_with_the_hint(tmp_path):
    from scrapy.settings import Settings

    from productcrawler.commands.preflight import check

    # Read as urlsplit reads it: password "p", host 127.0.0.1, port 1 (nothing listens there).
    settings = Settings()
    settings.setmodule("productcrawler.settings")
    settings.set("DATABASE_URL", f"mysql://u:p@127.0.0.1:1/{SECRET}@127.0.0.1/shop")
    with pytest.raises(ConfigError) as error:
        check(settings, {})
    assert "cannot use the database" in str(error.value) and str(error.value).endswith(HINT)
    assert SECRET not in str(error.value)


def test_the_crawl_refuses_a_password_with_an_unencoded_question_mark_with_the_hint(tmp_path):
    result = run_crawl(settings={"DATABASE_URL": "mysql://u:pa?ss#word@127.0.0.1/shop"}, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert lines == ["productcrawler: configuration error: DATABASE_URL='mysql://u:***@127.0.0.1/shop' "
                     f"has query options that cannot be read{HINT}"], result.stderr[-2000:]


@pytest.mark.parametrize("url", ["redis://r.internal/abc", "redis://r.internal:6379/-1", "rediss://r.internal:6380/0/1",
                                 "redis://r.internal/1x", "redis://r.internal/%C2%B3", "redis://r.internal/0?db=-1",
                                 "redis+cluster://r.internal:6379/abc"])
def test_a_redis_database_that_is_not_a_whole_number_is_refused(url):
    with pytest.raises(ConfigError) as error:
        CrawlConfig.from_settings({"REDIS_URL": url})
    assert str(error.value).startswith(f"REDIS_URL={url!r}") and "must be a whole number" in str(error.value)


@pytest.mark.parametrize(("url", "db"), [("redis://r.internal:6379", 0), ("redis://r.internal:6379/", 0),
                                         ("redis://r.internal:6379/15", 15), ("rediss://r.internal/3", 3),
                                         ("redis://r.internal/?db=2", 2), ("unix:///run/redis.sock?db=1", 1)])
def test_a_redis_database_that_is_a_whole_number_is_the_one_redis_py_selects(url, db):
    from redis.connection import parse_url

    assert CrawlConfig.from_settings({"REDIS_URL": url}).redis.url == url
    assert parse_url(url).get("db", 0) == db


@pytest.mark.parametrize(("name", "url", "pieces", "says"), [
    # The password "@127.0.0.1/Zq9Xv": root with no password, and the rest of it read as the database.
    ("DATABASE_URL", "mysql://root:@127.0.0.1/Zq9Xv@127.0.0.1:3306/shop", ["Zq9Xv"], "cannot use the database"),
    # The password "Zq@localhost:1/Xv": its middle read as the host and port.
    ("DATABASE_URL", "mysql://root:Zq@localhost:1/Xv@127.0.0.1:3306/shop", ["Zq", "localhost", "Xv"],
     "cannot use the database"),
    ("REDIS_URL", "redis://:Zq@localhost:1#Xv@127.0.0.1:6379/0", ["Zq", "localhost", "Xv"], "cannot reach Redis"),
])
def test_a_driver_error_about_a_misread_password_quotes_no_part_of_it(tmp_path, name, url, pieces, says):
    """The real MariaDB and Redis: their drivers name what they were given, here pieces of the password."""
    settings = {"DATABASE_URL": f"sqlite:///{tmp_path}/x.db", name: url}
    result = run_crawl(settings=settings, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"productcrawler: configuration error: {name}=") and says in lines[0], lines[0]
    assert lines[0].endswith(HINT), lines[0]
    for piece in pieces:
        assert piece not in result.stderr + result.stdout, (piece, lines[0])
    # scrapy progress reaches the same servers with the same URLs.
    shown = subprocess.run([sys.executable, "-m", "scrapy", "progress"], cwd=ROOT, env=crawl_env(**settings),
                           capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 2 and says in shown.stderr and shown.stderr.rstrip().endswith(HINT), shown.stderr
    for piece in pieces:
        assert piece not in shown.stderr + shown.stdout, (piece, shown.stderr)


@pytest.mark.parametrize(("url", "secrets", "says"), [
    # Read as redis-py reads it, the password "Zq@localhost:1#Xv" is "Zq", then the host localhost, port 1.
    ("redis://:Zq@localhost:1#Xv@127.0.0.1:6379/0", ["Zq", "localhost", "Xv"],
     "REDIS_URL='redis://:***@127.0.0.1:6379/0': cannot reach Redis for the shared rate limit: ConnectionError "
     f"(the driver's message is not shown: the host, port or database it names may be pieces of the password){HINT}"),
    # A plain password: Redis's own answer is shown, and it does not quote the password.
    (f"redis://nobody:{SECRET}@127.0.0.1:6379/0", [SECRET],
     "REDIS_URL='redis://nobody:***@127.0.0.1:6379/0': cannot reach Redis for the shared rate limit: "
     "invalid username-password pair or user is disabled."),
])
def test_the_rate_limits_own_redis_check_follows_the_same_rule(tmp_path, url, secrets, says):
    """The real Redis, reached by the rate limit's own ping: ``scrapy runspider`` has no start-up checks,
    so the middleware is the first to use REDIS_URL (the crawl command's check would refuse it before)."""
    result = subprocess.run([sys.executable, "-m", "scrapy", "runspider", "productcrawler/spiders/products.py"],
                            cwd=ROOT, env=crawl_env(REDIS_URL=url, DATABASE_URL=f"sqlite:///{tmp_path}/x.db"),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, result.stderr[-2000:]
    said = [line for line in result.stderr.splitlines() if "cannot reach Redis" in line]
    assert said == [f"redis.exceptions.ConnectionError: {says}"], result.stderr[-3000:]
    # One ERROR: the crawl that failed to start. (The download handler's aiohttp sessions, opened
    # before the middleware refused, are reported unclosed as the process exits.)
    errors = [line for line in result.stderr.splitlines()
              if " ERROR: " in line and "Unclosed client session" not in line]
    assert len(errors) == 1 and "Spider opened" not in result.stderr, result.stderr[-3000:]
    for secret in secrets:
        assert secret not in result.stderr + result.stdout, (secret, result.stderr[-3000:])
