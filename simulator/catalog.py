"""The simulated catalogue: a deterministic product for every id, computed on demand.

Nothing is stored: each field comes from a 64-bit hash of the id (and, for the
fields that change hourly, of the catalogue version), so any id up to
``MAX_PRODUCT_ID`` costs the same few microseconds. Name, brand and category
are stable per id; price, stock, sales_count and updated_at follow ``version``,
which defaults to the current UTC hour number.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

MAX_PRODUCT_ID = 2**63 - 1  # a signed BIGINT
MISSING_PERCENT = 3
HUGE_DESCRIPTION_BYTES = 3 * 1024 * 1024
SQLISH_NAME = "Robert'); DROP TABLE products;--"

_MASK = 2**64 - 1

# (category path, price range in yuan, specs, colours, brands with their product lines)
_Category = tuple[str, int, int, tuple[str, ...], tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]
_CATEGORIES: tuple[_Category, ...] = (
    ("数码电器/手机", 999, 9999, ("128GB", "256GB", "512GB", "1TB"), ("黑色", "白色", "蓝色", "钛金属原色"), (
        ("Apple", ("iPhone 15", "iPhone 15 Pro", "iPhone 15 Pro Max", "iPhone 14")),
        ("华为", ("Mate 60 Pro", "P60 Art", "nova 12")),
        ("小米", ("Xiaomi 14 Pro", "Redmi K70", "Redmi Note 13")),
        ("OPPO", ("Find X7", "Reno11")),
        ("vivo", ("X100 Pro", "iQOO 12")),
        ("荣耀", ("Magic6", "X50")))),
    ("数码电器/笔记本电脑", 3999, 19999, ("16GB+512GB", "16GB+1TB", "32GB+1TB"), ("深空灰", "银色"), (
        ("联想", ("ThinkPad X1 Carbon", "小新 Pro 14", "拯救者 Y9000P")),
        ("Apple", ("MacBook Air 13", "MacBook Pro 14")),
        ("华为", ("MateBook X Pro", "MateBook 14")),
        ("戴尔", ("XPS 13", "灵越 14")),
        ("华硕", ("灵耀 14", "ROG 幻16")))),
    ("数码电器/耳机", 199, 2999, ("无线降噪", "蓝牙5.3", "入耳式"), ("黑色", "白色"), (
        ("索尼", ("WH-1000XM5", "WF-1000XM5")),
        ("Apple", ("AirPods Pro 2", "AirPods 3")),
        ("华为", ("FreeBuds Pro 3", "FreeBuds 5i")),
        ("Bose", ("QuietComfort 45", "QC 消噪耳塞 II")),
        ("漫步者", ("W820NB", "NeoBuds Pro 2")))),
    ("家用电器/冰箱", 1499, 12999, ("500升 对开门", "406升 十字门", "218升 三门"), ("星蕴银", "晶釉白"), (
        ("海尔", ("BCD-500WLHSS", "BCD-406WLHTD")),
        ("美的", ("BCD-508WKPZM", "BCD-215WTM")),
        ("西门子", ("KA50NE20TI", "KX50NA41TI")),
        ("容声", ("BCD-529WD18HPA", "BCD-218D11N")))),
    ("家用电器/洗衣机", 999, 6999, ("10公斤 滚筒", "8公斤 波轮", "12公斤 洗烘一体"), (), (
        ("小天鹅", ("水魔方 TG100", "本色 TB80")),
        ("海尔", ("EG100MATE35", "XQB80-Z206")),
        ("美的", ("MG100V11D", "MB80ECO")))),
    ("家用电器/空调", 1999, 8999, ("1.5匹 新一级能效 变频", "1匹 挂机", "3匹 柜机"), (), (
        ("格力", ("云佳", "天丽", "云锦")),
        ("美的", ("风尊", "酷省电")),
        ("海尔", ("静悦", "雷神者")),
        ("奥克斯", ("京裕", "智享")))),
    ("服饰鞋包/运动鞋", 199, 1499, ("40码", "41码", "42码", "43码"), ("黑白", "全白", "灰蓝"), (
        ("Nike", ("Air Force 1 '07", "Air Max 90", "Pegasus 40")),
        ("adidas", ("Ultraboost 23", "Samba OG")),
        ("李宁", ("超轻21", "韦德之道 11")),
        ("安踏", ("C37", "KT9")))),
    ("服饰鞋包/男装", 59, 499, ("M", "L", "XL", "XXL"), ("黑色", "藏青", "米白"), (
        ("优衣库", ("圆领T恤", "摇粒绒茄克")),
        ("海澜之家", ("商务衬衫", "休闲裤")),
        ("太平鸟", ("连帽卫衣", "牛仔裤")))),
    ("美妆个护/护肤", 99, 1599, ("30ml", "50ml", "100ml"), (), (
        ("兰蔻", ("小黑瓶精华", "菁纯面霜")),
        ("雅诗兰黛", ("小棕瓶精华", "智妍面霜")),
        ("SK-II", ("神仙水", "小灯泡精华")),
        ("珀莱雅", ("双抗精华", "红宝石面霜")))),
    ("食品生鲜/休闲零食", 19, 199, ("500g", "750g", "1kg 礼盒"), (), (
        ("三只松鼠", ("每日坚果", "夏威夷果")),
        ("良品铺子", ("猪肉脯", "芒果干")),
        ("百草味", ("坚果大礼包", "碧根果")))),
    ("母婴用品/纸尿裤", 79, 299, ("NB码", "S码", "M码", "L码"), (), (
        ("帮宝适", ("一级帮", "清新帮")),
        ("花王", ("妙而舒", "妙而舒 拉拉裤")),
        ("好奇", ("心钻装", "铂金装")))),
    ("家居家装/床上用品", 199, 1999, ("1.5m床", "1.8m床", "2.0m床"), ("米白", "浅灰", "雾蓝"), (
        ("罗莱家纺", ("纯棉四件套", "蚕丝被")),
        ("水星家纺", ("长绒棉四件套", "羽绒被")),
        ("富安娜", ("天丝四件套", "乳胶枕")))),
    ("图书音像/小说", 19, 159, ("平装", "精装", "典藏版"), (), (
        ("人民文学出版社", ("红楼梦", "围城")),
        ("重庆出版社", ("三体全集",)),
        ("上海译文出版社", ("挪威的森林", "1984")))),
)
_SERVICES = ("顺丰包邮", "次日达", "七天无理由退货", "全国联保", "以旧换新")
_DISCOUNTS = (100, 100, 100, 95, 90, 88, 85)  # percent of the list price, per hour


def _hash(product_id: int, salt: int) -> int:
    """SplitMix64 finaliser of (id, salt): cheap, well mixed, no global state."""
    x = (product_id * 0x9E3779B97F4A7C15 + salt * 0xD6E8FEB86659FD93) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def current_version() -> int:
    """The catalogue version of this moment: the UTC hour number."""
    return int(time.time() // 3600)


def is_missing(product_id: int) -> bool:
    """Whether the API answers 404 for this id (about 3 % of ids)."""
    return _hash(product_id, 0) % 100 < MISSING_PERCENT


@lru_cache(maxsize=16)
def _hour_stamp(version: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(version * 3600))


def product(product_id: int, version: int | None = None) -> dict[str, Any]:
    """The product JSON object for ``product_id`` at catalogue ``version``.

    Defined for every id, including the ones ``is_missing`` says the API hides.
    """
    if version is None:
        version = current_version()
    stable = _hash(product_id, 1)
    stable, index = divmod(stable, len(_CATEGORIES))
    category, low, high, specs, colours, brands = _CATEGORIES[index]
    stable, index = divmod(stable, len(brands))
    brand, lines = brands[index]
    stable, index = divmod(stable, len(lines))
    line = lines[index]
    stable, spec_index = divmod(stable, len(specs))
    stable, colour = divmod(stable, 1024)
    stable, list_price = divmod(stable, high - low + 1)
    list_price += low
    list_price = list_price // 100 * 100 + 99 if list_price >= 1000 else list_price // 10 * 10 + 9
    stable, base_sales = divmod(stable, 1000)
    stable, rating = divmod(stable, 151)
    stable, services = divmod(stable, len(_SERVICES))
    images = 1 + stable % 4

    hourly = _hash(product_id, 2 + version)
    hourly, discount = divmod(hourly, len(_DISCOUNTS))
    hourly, stock = divmod(hourly, 2000)
    hourly, sales_delta = divmod(hourly, 500)
    if hourly % 20 == 0:
        stock = 0

    name = f"{brand} {line} {specs[spec_index]}"
    if colours:
        name += " " + colours[colour % len(colours)]
    return {
        "id": product_id,  # the article's shape; simulator/shapes.py serves the others
        "name": name,
        "price": list_price * _DISCOUNTS[discount] / 100,
        "currency": "CNY",
        "stock": stock,
        "category": category,
        "brand": brand,
        "rating": (350 + rating) / 100,
        "sales_count": base_sales * base_sales // 20 + sales_delta,
        "description": f"{name}，{category.rsplit('/', 1)[1]}，{brand}官方旗舰店正品。"
                       f"{_SERVICES[services]}，{_SERVICES[services - 1]}。",
        "images": [f"https://img.example.com/p/{product_id}/{n}.jpg" for n in range(1, images + 1)],
        "updated_at": _hour_stamp(version),
    }


def variant(mode: str, product_id: int, version: int) -> dict[str, Any]:
    """The product object served by a fault mode that still answers with a product.

    ``mode`` is one of ``wrongid``, ``dirty``, ``huge``, ``sqlish``, ``emoji``,
    ``outofrange``; the result is deterministic, like ``product``.
    """
    if mode == "wrongid":
        return product(product_id + 1 if product_id < MAX_PRODUCT_ID else 1, version)
    item = product(product_id, version)
    if mode == "dirty":
        return _dirty(item)
    if mode == "huge":
        item["description"] = "这是一段超长的商品描述。" * (HUGE_DESCRIPTION_BYTES // 36)
    elif mode == "sqlish":
        item["name"] = SQLISH_NAME
    elif mode == "emoji":
        item["name"] = f"📱 {item['name']} 🚀"
    elif mode == "outofrange":
        item.update(price=1e12, stock=10**12, sales_count=-5, rating=99)
    else:
        raise ValueError(f"no product variant for fault mode {mode!r}")
    return item


def _dirty(item: dict[str, Any]) -> dict[str, Any]:
    """Values as a sloppy upstream sends them; which form is chosen by the id."""
    product_id = item["id"]
    price, brand, name = item["price"], item["brand"], item["name"]
    rest = name[len(brand) + 1:]
    item.update(
        price=(f"¥{price:,.2f}", f"{price:,.2f}", None)[product_id % 3],
        name=f"  <b>{brand}</b>\n {rest.replace(' ', '   ', 1)} ",
        category=f"<span>{item['category']}</span>",
        brand=f"<em>{brand}</em>",
        stock=str(item["stock"]),
        sales_count=-item["sales_count"] - 1,
        rating=f"{item['rating']:.1f}" if product_id % 2 else 7.5,
    )
    return item
