"""Every setting the code reads is declared (productcrawler/config/declared.py) and documented; every declared
setting is read.

Read from the source, not at run time: a setting read by a branch no test takes is caught all the same.
A read is an UPPER_CASE name given to a settings getter (``settings.get("NAME")``, ``getbool``, ...,
the configuration's ``read("NAME")``), as a literal or a module constant; and an attribute of the
configuration (``config.rate.burst``), which must be one its section has.
"""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest
from scrapy.settings import default_settings as scrapy_defaults

from productcrawler.config import sections
from productcrawler.config.crawl import CrawlConfig
from productcrawler.config.declared import DECLARED, SCRAPYS, SETTINGS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "productcrawler"
GETTERS = frozenset({"get", "getbool", "getint", "getfloat", "getlist", "getdict", "getdictorlist", "getwithbase",
                     "getpriority", "raw", "read", "__getitem__"})
SETTING_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{3,}")
#: Where a receiver named like this is the crawl's configuration (``config.rate``, ``spider.config.api``).
CONFIG_RECEIVERS = frozenset({"config", "crawl", "crawl_config"})
SECTIONS = {section.name: section.type for section in fields(CrawlConfig)}


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's ``NAME = "TEXT"`` constants."""
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def settings_read(source: str) -> set[str]:
    """The setting names ``source`` gives a settings getter (the first argument, or a subscript of DECLARED)."""
    tree = ast.parse(source)
    constants = _constants(tree)
    names = set()
    for node in ast.walk(tree):
        argument: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            function = node.func
            called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            if called in GETTERS:
                argument = node.args[0]
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "DECLARED":
            argument = node.slice
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            name = argument.value
        elif isinstance(argument, ast.Name) and argument.id in constants:
            name = constants[argument.id]
        else:
            continue
        if SETTING_NAME.fullmatch(name):
            names.add(name)
    return names


def configuration_reads(source: str) -> set[tuple[str, str | None]]:
    """``(section, attribute)`` of every ``<...>config.<section>[.<attribute>]`` in ``source``."""
    attributes = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)]
    reads: set[tuple[str, str | None]] = set()
    for node in attributes:
        receiver = node.value
        if isinstance(receiver, ast.Call):  # crawl_config(crawler).rate
            receiver = receiver.func
        receiver_name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
        if node.attr not in SECTIONS or receiver_name not in CONFIG_RECEIVERS:
            continue
        reads.add((node.attr, None))
        reads.update((node.attr, outer.attr) for outer in attributes if outer.value is node)
    return reads


def sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def section_class(name: str) -> type:
    """The section's class (the annotations are text: ``"ProxyConfig | None"``)."""
    klass: type = getattr(sections, str(SECTIONS[name]).split(" | ")[0])
    return klass


def attributes_of(klass: type) -> set[str]:
    return {field.name for field in fields(klass)} | set(dir(klass))


def test_every_setting_read_is_declared_or_scrapys_own() -> None:
    unknown = {name: path.relative_to(ROOT) for path, source in sources().items()
               for name in settings_read(source) if name not in DECLARED and not hasattr(scrapy_defaults, name)}
    assert not unknown, f"read but not declared in productcrawler/config/declared.py: {unknown}"


def test_every_declared_setting_is_documented() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    undocumented = [s.name for s in SETTINGS if f"`{s.name}`" not in page]
    assert not undocumented, f"declared but not on docs/configuration.md: {undocumented}"
    assert all(hasattr(scrapy_defaults, s.name) for s in SCRAPYS), "SCRAPYS holds Scrapy's own settings only"


def named_in(source: str) -> set[str]:
    """Every setting name written as a string in ``source`` (the sections read LIST_* from a table)."""
    return {node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and SETTING_NAME.fullmatch(node.value)}


def test_every_declared_setting_is_read() -> None:
    # Read: given to a getter anywhere, or named by the configuration's readers (config/ but the
    # declaration and the page made from it).
    readers = [source for path, source in sources().items() if PACKAGE / "config" in path.parents
               and path.name not in ("declared.py", "reference.py")]
    read = set().union(*(settings_read(source) for source in sources().values()),
                       *(named_in(source) for source in readers))
    unread = [name for name in DECLARED if name not in read]
    assert not unread, f"declared but read by no code: {unread}"


def test_components_read_their_section_not_our_settings() -> None:
    # Outside config/, a setting of ours is read through the configuration (config.rate.burst),
    # where it is parsed once, never with settings.get("MAX_REQUESTS_PER_SECOND").
    raw = {name: path.relative_to(ROOT) for path, source in sources().items()
           if PACKAGE / "config" not in path.parents
           for name in settings_read(source) if name in DECLARED and name not in {s.name for s in SCRAPYS}
           and DECLARED[name].environment}
    assert not raw, f"read past the configuration: {raw}"


def test_every_configuration_attribute_read_is_one_its_section_has() -> None:
    missing = []
    for path, source in sources().items():
        for section, attribute in configuration_reads(source):
            if attribute is not None and attribute not in attributes_of(section_class(section)):
                missing.append(f"{path.relative_to(ROOT)}: config.{section}.{attribute}")
    assert not missing, missing


@pytest.mark.parametrize(("source", "found"), [
    ('settings.getbool("SOMETHING_NEW")', {"SOMETHING_NEW"}),
    ('ENV = "LOG_LEVEL_X"\nsettings.get(ENV)', {"LOG_LEVEL_X"}),
    ('read("RATE_LIMIT_BURST")', {"RATE_LIMIT_BURST"}),
    ('settings.get("lowercase")', set()),
])
def test_the_scan_finds_a_read(source: str, found: set[str]) -> None:
    assert settings_read(source) == found


def test_the_scan_finds_a_configuration_attribute() -> None:
    assert configuration_reads("crawl_config(crawler).rate.burst") == {("rate", None), ("rate", "burst")}
    assert ("rate", "nonsense") in configuration_reads("self.config.rate.nonsense")
