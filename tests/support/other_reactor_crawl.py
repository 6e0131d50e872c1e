"""A small crawl on another Twisted reactor than the tests' (one reactor per process): run it as a script.

``python tests/support/other_reactor_crawl.py SETTINGS_JSON URL...`` crawls the URLs
with those settings (``"TWISTED_REACTOR": null`` is Twisted's own default
reactor, without asyncio) and prints one JSON line: ``outcomes`` (each URL's
status, or the name of the exception its errback got), ``downloader`` (the
class the engine used) and ``reactor`` (the class of the installed reactor).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess


class Fetch(Spider):
    name = "fetch"

    def __init__(self, urls: list[str], outcomes: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls, self.outcomes = urls, outcomes

    async def start(self) -> Any:
        for url in self.urls:
            yield Request(url, errback=self.failed, dont_filter=True)

    def parse(self, response: Any) -> None:
        self.outcomes[response.url] = response.status

    def failed(self, failure: Any) -> None:
        self.outcomes[failure.request.url] = type(failure.value).__name__


def main() -> None:
    settings, urls = json.loads(sys.argv[1]), sys.argv[2:]
    outcomes: dict[str, Any] = {}
    process = CrawlerProcess({"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, **settings},
                             install_root_handler=False)
    crawler = process.create_crawler(Fetch)
    process.crawl(crawler, urls=urls, outcomes=outcomes)
    process.start()
    from twisted.internet import reactor  # the one the crawl ran on

    downloader = type(crawler.engine.downloader)
    print(json.dumps({"outcomes": outcomes, "downloader": f"{downloader.__module__}.{downloader.__qualname__}",
                      "reactor": f"{type(reactor).__module__}.{type(reactor).__qualname__}"}))


if __name__ == "__main__":
    main()
