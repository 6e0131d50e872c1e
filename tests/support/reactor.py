"""The crawl's reactor and its asyncio loop, for tests that run code on that loop without a crawl."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

_loop: asyncio.AbstractEventLoop | None = None


def install() -> None:
    """Install the crawl's reactor and its event loop (conftest.py's pytest_configure, before any
    test module imports twisted.internet.reactor, which would install the default one).

    Scrapy's get_crawler() builds its settings for whichever reactor is installed, so without
    this a component's reactor check depends on the order of the tests; and Scrapy refuses a
    crawler whose ASYNCIO_EVENT_LOOP differs from the installed one.
    """
    from scrapy.utils.reactor import install_reactor

    from productcrawler import settings

    install_reactor(settings.TWISTED_REACTOR, settings.ASYNCIO_EVENT_LOOP)
    from twisted.internet import reactor  # the one just installed

    global _loop
    _loop = reactor._asyncioEventloop  # Twisted keeps no public handle on it


def make_current() -> None:
    """Make the crawl's loop the current one: a test that used ``asyncio.run`` leaves none, and
    Scrapy's Deferred-to-Future conversion asks for it."""
    if _loop is not None:
        asyncio.set_event_loop(_loop)


def on_reactor_loop(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end on the asyncio reactor's event loop (the reactor itself is not running).

    The loop a crawl runs the pass and scheduler on: Deferreds from the
    database pool's threads arrive there. Set as the current loop first,
    because tests that use ``asyncio.run`` leave none set.
    """
    assert _loop is not None, "the crawl's reactor is not installed (tests/conftest.py installs it)"
    asyncio.set_event_loop(_loop)
    return _loop.run_until_complete(coroutine)


class LoopServer:
    """An aiohttp.web server (port 0) on the reactor's loop, as a module fixture's body:
    ``yield from LoopServer.running(Subclass())``; subclasses answer every path in ``handle``."""

    def __init__(self, tls: Any = None) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None)
        self.tls = tls  # an ssl.SSLContext: the server speaks TLS
        self.port = 0

    async def handle(self, request: Any) -> Any:
        raise NotImplementedError

    def url(self, path: str) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    async def _start(self) -> None:
        from aiohttp import web

        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    @staticmethod
    def running(server: LoopServer) -> Iterator[Any]:
        on_reactor_loop(server._start())
        try:
            yield server
        finally:
            on_reactor_loop(server.runner.cleanup())
