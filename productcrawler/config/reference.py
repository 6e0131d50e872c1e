"""The configuration reference page, made from the declaration (:mod:`.declared`).

``docs/configuration.md`` is this module's output (``python -m
productcrawler.config.reference > docs/configuration.md``); a test keeps the
two equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from productcrawler.config.declared import DEFAULTS, SETTINGS

#: Topics in the order the page shows them, with their headings.
TOPICS = {
    "api": "The API: where, how and what",
    "ids": "Ids",
    "listing": "Listing: a pass over the API's product listing",
    "rate": "Rate limit",
    "retries": "Retries",
    "storage": "Storage",
    "redis": "Redis: several instances, one pass",
    "guard": "The guard: stopping on answers that say the configuration is wrong",
    "proxies": "Proxies",
    "ops": "Progress, metrics and logs",
}


@dataclass(frozen=True)
class Row:
    """One row of the page."""

    names: tuple[str, ...]
    topic: str
    kind: str
    meaning: str
    default: str


#: The page's rows, one per declared setting, in the declaration's order.
REFERENCE: tuple[Row, ...] = tuple(Row((s.name,), s.topic, s.kind, s.meaning, s.shown) for s in SETTINGS)

#: Settings on the page that the add-on does not fill in from the environment.
OUTSIDE_DEFAULTS = tuple(s.name for s in SETTINGS if s.name not in DEFAULTS)

_INTRO = """# Configuration

Every value comes from the environment or, under the same name, from a Scrapy
setting (`-s NAME=value`, scrapyd's `setting=NAME=value`); a setting given
explicitly wins over the environment. All are read and validated in one place,
`productcrawler/config/`: a bad value stops the crawl before it starts (exit 2)
with one line naming the setting and its value, passwords masked.

This page is generated from `productcrawler/config/declared.py`
(`python -m productcrawler.config.reference > docs/configuration.md`).
"""


def markdown() -> str:
    """The reference page: one table per topic."""
    lines = [_INTRO]
    for topic, heading in TOPICS.items():
        lines += [f"## {heading}", "", "| name | kind | meaning | default |", "|---|---|---|---|"]
        for setting in REFERENCE:
            if setting.topic == topic:
                names = ", ".join(f"`{name}`" for name in setting.names)
                lines.append(f"| {names} | {setting.kind} | {setting.meaning} | {setting.default} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
