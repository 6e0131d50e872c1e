"""Id files: the one streaming scan (count, digest, offset index), positions to ids, and the start-up checks."""

from __future__ import annotations

import hashlib
import random

import pytest
from scrapy.settings import Settings

from productcrawler.config import ConfigError, CrawlConfig
from productcrawler.ids import IdFile, RangeIds
from productcrawler.ids.idfile import INDEX_EVERY


def write(tmp_path, text: str, name: str = "ids.txt") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return str(path)


def test_positions_count_ids_not_lines_and_the_digest_is_the_files(tmp_path):
    text = "\n  7  \n\n12\r\n7\n\t4000000000000\n 99"  # blank lines, whitespace, CRLF, a duplicate, no final newline
    ids = IdFile.scan(write(tmp_path, text), "int")
    assert ids.total == 5
    assert ids.digest == hashlib.sha256(text.encode()).hexdigest()
    assert ids.descriptor == f"file:{ids.digest}:5"
    assert ids.ids_at([1, 2, 3, 4, 5]) == [7, 12, 7, 4000000000000, 99]
    assert ids.ids_at([5, 1, 3]) == [99, 7, 7]
    assert [pair for chunk in ids.chunks(2) for pair in chunk] == [(1, 7), (2, 12), (3, 7), (4, 4000000000000),
                                                                    (5, 99)]


def test_the_offset_index_maps_any_position_to_its_id(tmp_path):
    count = INDEX_EVERY * 5 + 17
    values = [random.Random(n).randrange(1, 10**13) for n in range(count)]
    lines = []
    for n, value in enumerate(values):
        lines.append(f"{value}\n" + ("\n" if n % 97 == 0 else ""))  # blank lines inside index blocks
    ids = IdFile.scan(write(tmp_path, "".join(lines)), "int")
    assert ids.total == count and len(ids.offsets) == 6  # one offset per INDEX_EVERY ids: the whole index
    assert ids.ids_at(list(range(1, count + 1))) == values  # sequential
    order = list(range(1, count + 1))
    random.Random(1).shuffle(order)
    assert ids.ids_at(order) == [values[p - 1] for p in order]  # a retry, a recovered lease: anywhere
    # Another instance's batches interleave with ours: forward jumps of a few batches.
    stride = [p for start in range(1, count, 96) for p in range(start, min(start + 32, count + 1))]
    assert ids.ids_at(stride) == [values[p - 1] for p in stride]
    with pytest.raises(IndexError):
        ids.ids_at([count + 1])
    ids.close()


def test_string_ids_are_kept_as_written_but_for_surrounding_whitespace(tmp_path):
    ids = IdFile.scan(write(tmp_path, "WS12 M/Blue\n  00123 \n#1 élan\n" + "x" * 64 + "\r\nA\tB\n"), "string")
    assert ids.ids_at([1, 2, 3, 4, 5]) == ["WS12 M/Blue", "00123", "#1 élan", "x" * 64, "A\tB"]


def test_a_range_is_an_id_source_too():
    ids = RangeIds(10**12, 10**12 + 9)
    assert ids.total == 10 and ids.ids_at([1, 10]) == [10**12, 10**12 + 9] and ids.position_of(10**12 + 3) == 4


def config(**settings: object) -> CrawlConfig:
    return CrawlConfig.from_settings(Settings({k: str(v) for k, v in settings.items()}))


@pytest.mark.parametrize(("text", "id_type", "expected"), [
    ("1\n2\nabc\n", "int", ["line 3", "'abc' is not an integer id (PRODUCT_ID_TYPE=int)"]),
    ("1\n\n\n-4\n", "int", ["line 4", "'-4' is not an integer id"]),
    ("1\n0\n", "int", ["line 2", "'0' is not between 1 and 9223372036854775807"]),
    ("9223372036854775808\n", "int", ["line 1", "not between 1 and 9223372036854775807"]),
    ("1\n" + "7" * 65 + "\n", "int", ["line 2", "65 characters long; at most 64"]),
    ("ok\n" + "é" * 65 + "\n", "string", ["line 2", "65 characters long"]),
    ("ok\nab\x00c\n", "string", ["line 2", "'ab\\x00c' holds the control character U+0000"]),
    ("ok\n\nab\x1bc\n", "string", ["line 3", "U+001B"]),
    ("ok\na\rb\n", "string", ["line 2", "U+000D"]),
    ("ok\nab\x7f\n", "string", ["line 2", "U+007F"]),
    ("ok\nab\u0085\n", "string", ["line 2", "U+0085"]),
    ("", "int", ["has no ids"]),
    ("\n  \n\n", "string", ["has no ids"]),
])
def test_a_bad_id_file_is_refused_naming_the_setting_the_file_and_the_line(tmp_path, text, id_type, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        config(PRODUCT_IDS=f"@{path}", PRODUCT_ID_TYPE=id_type)
    message = str(raised.value)
    assert message.startswith(f"PRODUCT_IDS='@{path}': {path}: "), message
    for part in expected:
        assert part in message, message


def test_64_characters_of_multibyte_text_are_an_id(tmp_path):
    path = write(tmp_path, "é" * 64 + "\n")  # 128 bytes, 64 characters
    assert config(PRODUCT_IDS=f"@{path}", PRODUCT_ID_TYPE="string").ids.file.ids_at([1]) == ["é" * 64]


def test_a_missing_file_and_other_values_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"PRODUCT_IDS='@/no/such/ids.txt': /no/such/ids.txt: cannot read"):
        config(PRODUCT_IDS="@/no/such/ids.txt")
    with pytest.raises(ConfigError, match=r"PRODUCT_IDS='1,2,3': expected @path .* or failed"):
        config(PRODUCT_IDS="1,2,3")
    with pytest.raises(ConfigError, match=r"PRODUCT_ID_TYPE='uuid': expected int or string"):
        config(PRODUCT_ID_TYPE="uuid")
    with pytest.raises(ConfigError, match=r"ids and start_id/end_id are both given"):
        CrawlConfig.from_settings(Settings({}), start_id="1", ids="failed")
    with pytest.raises(ConfigError, match=r"ids \(spider argument\)='@/no/such': /no/such: cannot read"):
        CrawlConfig.from_settings(Settings({}), ids="@/no/such")


def test_the_ids_of_the_listing_are_taken_from_the_setting_or_the_spider_argument():
    listing = {"PRODUCT_LIST_URL": "https://shop.test/products.json", "PRODUCT_URL": "https://shop.test/p/{id}.json"}
    assert config(PRODUCT_IDS="list", **listing).ids.from_listing
    assert CrawlConfig.from_settings(Settings(listing), ids="list").ids.from_listing
    assert not CrawlConfig.from_settings(Settings({**listing, "PRODUCT_IDS": "list"}), ids="failed").ids.from_listing
    with pytest.raises(ConfigError, match=r"ids and start_id/end_id are both given"):
        CrawlConfig.from_settings(Settings(listing), start_id="1", ids="list")


def test_failed_and_64_bit_ranges_are_accepted():
    assert config(PRODUCT_IDS="failed").ids.failed_only
    wide = config(PRODUCT_ID_START=10**12, PRODUCT_ID_END=10**12 + 5)
    assert (wide.ids.start_id, wide.ids.end_id, wide.ids.file, wide.ids.type) == (10**12, 10**12 + 5, None, "int")
    with pytest.raises(ConfigError, match="spans at most 4294967296"):
        config(PRODUCT_ID_START=1, PRODUCT_ID_END=2**33)


def test_the_shared_pass_refuses_an_instance_with_another_file_unless_fresh(redis_prefix, tmp_path):
    """The OPEN script's own refusal: the start-up check can lose a race with another instance's start."""
    import redis.asyncio

    from productcrawler.passes.redis_pass import RedisPass
    from tests.support.reactor import on_reactor_loop
    from tests.support.services import REDIS_URL

    one = IdFile.scan(write(tmp_path, "5\n6\n7\n", "one.txt"), "int")
    two = IdFile.scan(write(tmp_path, "5\n6\n8\n", "two.txt"), "int")

    async def scenario() -> None:
        client = redis.asyncio.Redis.from_url(REDIS_URL)
        try:
            first = RedisPass(client, redis_prefix, one, instance="a")
            assert (await first.open(fresh=False)).startswith("Started pass 1 over 3 ids of")
            assert (await RedisPass(client, redis_prefix, one, instance="b").open(fresh=False)).startswith(
                "Joined pass 1")
            for other in (two, RangeIds(1, 3)):  # another file, or a range over as many ids
                with pytest.raises(ConfigError, match=r"the shared pass 1 in Redis runs over a file of 3 ids"):
                    await RedisPass(client, redis_prefix, other, instance="c").open(fresh=False)
            assert (await RedisPass(client, redis_prefix, two, instance="d").open(fresh=True)).startswith(
                "Started pass 2")
            assert [await first.status()] == ["replaced"]
        finally:
            await client.aclose()

    on_reactor_loop(scenario())
