"""PROXY_URLS and the pool's settings: parsed once, refused loudly, passwords never shown."""

from __future__ import annotations

import base64

import pytest
from scrapy.settings import Settings

from productcrawler.config import ConfigError
from productcrawler.config.proxy_urls import masked, parse_proxy_urls
from productcrawler.config.sections import ProxyConfig
from tests.support.crawls import crawl_env, run_crawl

SECRET = "pr0xy-pw"


def test_unset_or_empty_means_no_pool():
    assert ProxyConfig.from_settings(Settings()) is None
    assert ProxyConfig.from_settings(Settings({"PROXY_URLS": "  "})) is None


def test_a_comma_list_gives_credential_free_urls_labels_and_auth_headers():
    proxies = parse_proxy_urls(f"http://alice:{SECRET}@10.0.0.1:3128, http://10.0.0.2:8080,"
                               f"http://bob:p%40ss@10.0.0.1:3128")
    assert [p.url for p in proxies] == ["http://10.0.0.1:3128", "http://10.0.0.2:8080", "http://10.0.0.1:3128"]
    assert [p.label for p in proxies] == ["10.0.0.1:3128", "10.0.0.2:8080", "10.0.0.1:3128#2"]
    assert proxies[0].auth == b"Basic " + base64.b64encode(f"alice:{SECRET}".encode())
    assert proxies[1].auth is None
    assert proxies[2].auth == b"Basic " + base64.b64encode(b"bob:p@ss")
    assert len({p.key for p in proxies}) == 3
    assert all(SECRET not in p.key + p.label + p.shown + repr(p) for p in proxies)
    # The shared identity does not change with the password.
    assert parse_proxy_urls("http://alice:other@10.0.0.1:3128")[0].key == proxies[0].key


def test_a_file_lists_one_url_a_line(tmp_path):
    path = tmp_path / "proxies.txt"
    path.write_text(f"# egress pool\nhttp://u:{SECRET}@127.0.0.1:3128\n\n  http://127.0.0.1:3129  \n")
    assert [p.label for p in parse_proxy_urls(f"@{path}")] == ["127.0.0.1:3128", "127.0.0.1:3129"]


@pytest.mark.parametrize(("raw", "words"), [
    (f"socks5://u:{SECRET}@127.0.0.1:1080", ["socks5://u:***@127.0.0.1:1080", "only http://"]),
    (f"https://u:{SECRET}@proxy.test:443", ["https://", "only http://"]),
    (f"u:{SECRET}@127.0.0.1:3128", ["u:***@127.0.0.1:3128", "no scheme"]),
    ("http://127.0.0.1:port", ["not a number"]),
    ("http://127.0.0.1:3128/path", ["has a path"]),
    ("http://127.0.0.1:3128,http://127.0.0.1:3128", ["twice"]),
    ("@/no/such/file", ["PROXY_URLS=@/no/such/file", "cannot read"]),
])
def test_bad_proxy_urls_are_refused_with_the_password_masked(raw, words):
    with pytest.raises(ConfigError) as error:
        parse_proxy_urls(raw)
    for word in words:
        assert word in str(error.value)
    assert SECRET not in str(error.value)


@pytest.mark.parametrize(("settings", "words"), [
    ({"PROXY_SCORE_MIN": "100"}, ["PROXY_SCORE_MIN=100", "below the full score"]),
    ({"PROXY_SCORE_FAILURE": "0"}, ["PROXY_SCORE_FAILURE", "greater than 0"]),
    ({"PROXY_REST_BASE": "30", "PROXY_REST_MAX": "10"}, ["PROXY_REST_MAX=10", "PROXY_REST_BASE=30"]),
    ({"PROXY_MAX_REQUESTS_PER_SECOND": "none"}, ["PROXY_MAX_REQUESTS_PER_SECOND", "not a number"]),
])
def test_bad_pool_settings_are_refused(settings, words):
    with pytest.raises(ConfigError) as error:
        ProxyConfig.from_settings(Settings({"PROXY_URLS": "http://127.0.0.1:3128", **settings}))
    for word in words:
        assert word in str(error.value)


def test_defaults():
    config = ProxyConfig.from_settings(Settings({"PROXY_URLS": "http://127.0.0.1:3128"}))
    assert config is not None
    policy = config.policy
    assert (policy.success, policy.failure, policy.minimum, policy.rest_base, policy.rest_max) == (
        5.0, 20.0, 50.0, 10.0, 300.0)
    assert config.max_requests_per_second is None


@pytest.mark.parametrize("where", ["setting", "environment"])
def test_a_socks_proxy_stops_the_crawl_at_start_with_one_line(tmp_path, where):
    url = f"socks5://crawler:{SECRET}@127.0.0.1:1080"
    settings = {"DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}
    if where == "setting":
        result = run_crawl(settings={**settings, "PROXY_URLS": url}, timeout=60)
    else:
        result = run_crawl(settings=settings, env=crawl_env(PROXY_URLS=url), timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert lines == ["productcrawler: configuration error: PROXY_URLS: 'socks5://crawler:***@127.0.0.1:1080' "
                     "is a socks5:// proxy; only http:// proxies are supported (no SOCKS, no HTTPS proxy)"]
    assert SECRET not in result.stderr + result.stdout


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://u:{SECRET}@h:1", "http://u:***@h:1"),
    (f"u:{SECRET}@h:1", "u:***@h:1"),
    (f"http://u:{SECRET}:more@h:1", "http://u:***@h:1"),
    ("http://h:1", "http://h:1"),
])
def test_masked(url, shown):
    assert masked(url) == shown
