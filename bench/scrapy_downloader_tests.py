"""Scrapy's own downloader and engine tests, run with Scrapy's Downloader and with our LeanDownloader. By hand.

Usage (from the repository root; 3-4 minutes for the virtualenv, then about
1.5 minutes per reactor, 6 for the four; --workdir keeps the virtualenv for next time)::

    .venv/bin/python bench/scrapy_downloader_tests.py [--workdir /tmp/downloader-tests] [--reactors asyncio,default]

Downloads the sdist of the pinned Scrapy (``requirements.txt``) from the package
registry (``pip download --no-deps --no-binary :all:``; Scrapy's code is never
copied into this repository), extracts it, and makes a second copy of it in
which every crawler's downloader is ours: a pytest plugin written next to our
package sets ``scrapy.settings.default_settings.DOWNLOADER`` to
:class:`productcrawler.download.downloader.LeanDownloader` before the tests run (and
checks that a crawler built then gets it), and the test modules that import
``scrapy.core.downloader.Downloader`` by name import ours under that name
(``SWAPS``, each with the number of times it must occur). The same test
modules (``MODULES``) run in each copy, in a virtualenv made from
``requirements.txt`` plus Scrapy's test requirements (``tox.ini``'s
``[test-requirements]`` and, for the reactorless mode, its ``[testenv:no-reactor]``'s
``pytest-asyncio``; less coverage and xdist; pytest at this project's pin).
Only our ``productcrawler`` package is put on the path, not this repository's
``tests`` package, which would shadow Scrapy's.

The modules, chosen by reading Scrapy 2.19's tests for what reaches
``Downloader`` (``fetch``, ``_enqueue_request``, slots, ``active``,
``needs_backout``, its signals):

- ``test_core_downloader.py``: the Downloader class itself (jitter, slots,
  ``needs_backout``, slot garbage collection, ``fetch`` by a subclass);
- ``test_downloaderslotssettings.py``: ``DOWNLOAD_SLOTS`` concurrency and
  delays, measured in a crawl, and ``_get_slot``;
- ``test_engine.py``, ``test_engine_close_spider.py``, ``test_engine_loop.py``
  (the order in which requests reach the downloader, ``needs_backout``),
  ``test_engine_stop_download_bytes.py``, ``test_engine_stop_download_headers.py``:
  the engine driving the downloader;
- ``test_crawl.py``: crawls against Scrapy's mock server (delays, timeouts,
  retries, redirects, engine status);
- ``test_request_left.py``: ``request_left_downloader`` on success, timeout,
  disconnection and a refused connection;
- ``test_closespider.py``: crawls stopped with requests in the downloader;
- ``test_scheduler.py``: ``DownloaderAwarePriorityQueue``, which reads the
  downloader's slots, in a crawl (its other tests use a mock downloader);
- ``test_pipeline_crawl.py``: media pipelines, whose downloads go through
  ``engine.download`` to ``Downloader.fetch`` beside the scheduler's requests.

Left out: ``test_engine_download.py``, ``test_extension_throttle.py`` and
``test_pqueues.py`` replace the downloader with a mock; the download handler
tests test handlers (``bench/scrapy_handler_tests.py``); the command and
subprocess tests start new processes, which the plugin does not reach.

Reactors (``--reactors``; Scrapy's tests choose with ``--reactor``): ``asyncio``
is their default (``pyproject.toml``'s ``addopts``), Twisted's asyncio
reactor, as our crawl runs; ``uvloop`` is the same with uvloop's event loop
policy (set by a second plugin, for both downloaders), as our crawl runs it
(``ASYNCIO_EVENT_LOOP``); ``default`` is Twisted's own reactor, without
asyncio (tox's ``default-reactor``); ``none`` is Scrapy's reactorless mode
(tox's ``no-reactor``: ``-p no:twisted --reactor=none``).

Prints each test's outcome with Scrapy's downloader and with ours, per reactor,
then the differences. Exit status 0 when every test that passes with Scrapy's
downloader passes with ours, on every reactor run, 1 otherwise. There is no
expected difference: none of these tests asserts the looseness of Scrapy's
queue on the asyncio reactor (nor that a slot's concurrency holds without a
delay; ``tests/test_downloader.py`` does) or a private attribute ours changes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import _scrapy_sdist as sdist
from _scrapy_sdist import ABSENT

MODULES = (
    "tests/test_core_downloader.py",
    "tests/test_downloaderslotssettings.py",
    "tests/test_engine.py",
    "tests/test_engine_close_spider.py",
    "tests/test_engine_loop.py",
    "tests/test_engine_stop_download_bytes.py",
    "tests/test_engine_stop_download_headers.py",
    "tests/test_crawl.py",
    "tests/test_request_left.py",
    "tests/test_closespider.py",
    "tests/test_scheduler.py",
    "tests/test_pipeline_crawl.py",
)
OURS_CLASS = "productcrawler.download.downloader.LeanDownloader"
OURS_IMPORT = "from productcrawler.download.downloader import LeanDownloader as Downloader\n"
#: Per module, the swaps that make its explicit Downloader ours, and how often each must occur.
SWAPS = {
    "tests/test_core_downloader.py": (
        ("from scrapy.core.downloader import Downloader, Slot, tls\n",
         "from scrapy.core.downloader import Slot, tls\n" + OURS_IMPORT, 1),
    ),
    "tests/test_downloaderslotssettings.py": (
        ("from scrapy.core.downloader import Downloader, Slot\n",
         "from scrapy.core.downloader import Slot\n" + OURS_IMPORT, 1),
    ),
    "tests/test_engine.py": (("from scrapy.core.downloader import Downloader\n", OURS_IMPORT, 1),),
    "tests/test_scheduler.py": (("from scrapy.core.downloader import Downloader\n", OURS_IMPORT, 1),),
}
#: The pytest plugin of the copy that tests ours (``-p``): every crawler's DOWNLOADER defaults to ours.
PLUGIN = "lean_downloader_default"
PLUGIN_TEXT = f'''"""Written by bench/scrapy_downloader_tests.py: DOWNLOADER defaults to {OURS_CLASS}."""

from scrapy.settings import Settings, default_settings

default_settings.DOWNLOADER = "{OURS_CLASS}"
assert Settings()["DOWNLOADER"] == "{OURS_CLASS}"
'''
UVLOOP_PLUGIN = "uvloop_policy"
UVLOOP_PLUGIN_TEXT = '''"""Written by bench/scrapy_downloader_tests.py: asyncio's loops are uvloop's, as in a crawl."""

import asyncio

import uvloop

asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
'''
#: Per reactor choice, the arguments of pytest, and the plugins both sides load.
#: pytest-asyncio (pytest plugin "asyncio") is for the reactorless mode only, as in Scrapy's tox.ini.
REACTORS = {
    "asyncio": (("-p", "no:asyncio", "--reactor=asyncio"), ()),
    "uvloop": (("-p", "no:asyncio", "--reactor=asyncio"), (UVLOOP_PLUGIN,)),
    "default": (("-p", "no:asyncio", "--reactor=default"), ()),
    "none": (("-p", "no:twisted", "--reactor=none"), ()),
}


def lean_copy(source: Path, version: str) -> Path:
    """A copy of the extracted sdist whose tests name our downloader where they name Scrapy's (made afresh)."""
    ours = source.parent / f"{source.name}-lean"
    if ours.exists():
        shutil.rmtree(ours)  # fresh: the swaps are made on Scrapy's text, never on a previous run's
    shutil.copytree(source, ours)
    for module, swaps in SWAPS.items():
        (ours / module).write_text(sdist.swapped((source / module).read_text(), swaps, module, version))
    return ours


def plugins_path(directory: Path) -> Path:
    """A directory for PYTHONPATH: our package alone (this repository's tests/ would shadow Scrapy's), the plugins."""
    path = sdist.package_path(directory)
    (path / f"{PLUGIN}.py").write_text(PLUGIN_TEXT)
    (path / f"{UVLOOP_PLUGIN}.py").write_text(UVLOOP_PLUGIN_TEXT)
    return path


def run(source: Path, python: Path, path: Path, reactor: str, plugins: tuple[str, ...]) -> Path:
    """The modules in one pytest session on ``reactor``; the JUnit report's path."""
    report = source.parent / f"report-{source.name}-{reactor}.xml"
    arguments, common = REACTORS[reactor]
    loaded = [argument for plugin in (*common, *plugins) for argument in ("-p", plugin)]
    sdist.pytest(python, source, path, *arguments, *loaded, f"--junitxml={report}", *MODULES)
    return report


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """test ("module.Class::test") -> (PASS/FAIL/SKIP, first line of the failure or skip reason)."""
    results: dict[str, tuple[str, str]] = {}
    for classname, test, outcome in sdist.cases(report):
        name = f"{classname}::{test}"
        if results.get(name, ("PASS",))[0] == "PASS":  # a test's setup error after its pass is also a case
            results[name] = outcome
    return results


def compare(reactor: str, scrapy: dict[str, tuple[str, str]], ours: dict[str, tuple[str, str]]) -> list[str]:
    """Print the outcomes and the differences on one reactor; the tests that pass with Scrapy's only."""
    names = sorted(scrapy.keys() | ours.keys())
    print(f"\n== --reactor {reactor}\n{'Scrapy':6}  {'ours':6}  test")
    for name in names:
        print(f"{scrapy.get(name, ABSENT)[0]:6}  {ours.get(name, ABSENT)[0]:6}  {name}")
    regressions = [name for name in names if scrapy.get(name, ABSENT)[0] == "PASS"
                   and ours.get(name, ABSENT)[0] != "PASS"]
    others = [name for name in names if name not in regressions
              and scrapy.get(name, ABSENT)[0] != ours.get(name, ABSENT)[0]]
    sdist.print_both(f"Pass with Scrapy's downloader, not with ours (--reactor {reactor})", regressions, scrapy, ours)
    sdist.print_both(f"Other differences (--reactor {reactor})", others, scrapy, ours)
    print()
    for label, side in (("Scrapy's Downloader", scrapy), ("LeanDownloader", ours)):
        counts = {outcome: sum(1 for o, _ in side.values() if o == outcome) for outcome in ("PASS", "FAIL", "SKIP")}
        print(f"{label} (--reactor {reactor}): {counts['PASS']} passed, {counts['FAIL']} failed, "
              f"{counts['SKIP']} skipped")
    print(f"{len(regressions)} test(s) pass with Scrapy's downloader and not with ours; "
          f"{len(others)} other difference(s)")
    return regressions if scrapy else ["(no test ran)"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path,
                        help="keep the sdist and the virtualenv here and reuse them (default: a temporary directory)")
    parser.add_argument("--reactors", default=",".join(REACTORS),
                        help=f"comma-separated, of {', '.join(REACTORS)} (default: all)")
    args = parser.parse_args()
    reactors = args.reactors.split(",")
    if not set(reactors) <= REACTORS.keys():
        parser.error(f"--reactors: {args.reactors!r}; allowed: {', '.join(REACTORS)}")
    version = sdist.pinned("requirements.txt", "scrapy")
    results = {}
    with sdist.workdir(args.workdir, "scrapy-downloader-tests-") as directory:
        source = sdist.fetch(version, directory)
        ours = lean_copy(source, version)
        python = sdist.test_virtualenv(directory / "venv", source, "testenv:no-reactor")
        path = plugins_path(directory)
        for reactor in reactors:
            results[reactor] = (outcomes(run(source, python, path, reactor, ())),
                                outcomes(run(ours, python, path, reactor, (PLUGIN,))))
    print(f"Scrapy {version}'s tests: {', '.join(MODULES)}")
    failed = {reactor: compare(reactor, *sides) for reactor, sides in results.items()}
    print()
    for reactor, names in failed.items():
        print(f"--reactor {reactor}: {len(names)} test(s) pass with Scrapy's downloader and not with ours")
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
