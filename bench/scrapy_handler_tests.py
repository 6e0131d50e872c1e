"""Scrapy's own aiohttp handler tests, run against our lean handler and Scrapy's. By hand, like the benchmarks.

Usage (from the repository root; 2-3 minutes, most of it making the virtualenvs; about 1 with --workdir again)::

    .venv/bin/python bench/scrapy_handler_tests.py [--workdir /tmp/handler-tests]

Downloads the sdist of the pinned Scrapy (``requirements.txt``) from the package
registry (``pip download --no-deps --no-binary :all:``; Scrapy's code is never
copied into this repository) and extracts it: the test module
``tests/test_downloader_handler_aiohttp.py`` needs its ``tests/`` package (the
shared ``tests/utils/bases/download_handlers_http.py``, the mock servers), its
``conftest.py`` and its pytest configuration (``pyproject.toml``).

Next to the module it writes a copy whose handler is ours: the class under test
is :class:`productcrawler.download.handler.LeanAiohttpDownloadHandler` and the
``DOWNLOAD_HANDLERS`` of the module's mixin (used by the tests that run a
crawler) name it. Both modules run in one pytest session, in a virtualenv made
from ``requirements.txt`` plus Scrapy's test requirements (``tox.ini``'s
``[test-requirements]``, less coverage and xdist; pytest at this project's pin,
``requirements-dev.txt``). Only our ``productcrawler`` package is put on the
path, not this repository's ``tests`` package, which would shadow Scrapy's.

``mitmdump`` (for the proxy tests with credentials, ``TestMitmProxy``) comes
from a second virtualenv with ``mitmproxy`` (Scrapy's tests expect it outside
their environment); without it those tests skip for both handlers. Tests
marked ``requires_internet`` (``TestRealWebsite``) are deselected: this machine
reaches no website.

Prints each test's outcome with Scrapy's handler and with ours, then the
differences. Exit status 0 when every test that passes with Scrapy's handler
passes with ours, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _scrapy_sdist as sdist
from _scrapy_sdist import ABSENT

MODULE = "tests/test_downloader_handler_aiohttp.py"
OURS_MODULE = "tests/test_downloader_handler_lean.py"
SCRAPY_CLASS = "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"
OURS_CLASS = "productcrawler.download.handler.LeanAiohttpDownloadHandler"
#: The swaps that make the module test our handler, and how often each must occur.
SWAPS = (
    ("from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler\n",
     "from productcrawler.download.handler import LeanAiohttpDownloadHandler as AiohttpDownloadHandler\n", 1),
    (f'"{SCRAPY_CLASS}"', f'"{OURS_CLASS}"', 2),
)


def write_ours(source: Path, version: str) -> None:
    """Next to the test module, the copy that tests our handler."""
    (source / OURS_MODULE).write_text(sdist.swapped((source / MODULE).read_text(), SWAPS, MODULE, version))


def run(source: Path, python: Path, mitmdump: Path | None) -> Path:
    """Both modules in one pytest session; the JUnit report's path."""
    report = source / "report.xml"
    sdist.pytest(python, source, sdist.package_path(source.parent), "-m", "not requires_internet",
                 f"--junitxml={report}", MODULE, OURS_MODULE,
                 env={} if mitmdump is None else {"MITMDUMP": str(mitmdump)})
    return report


def outcomes(report: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """module -> test ("Class::test") -> (PASS/FAIL/SKIP, first line of the failure or skip reason)."""
    results: dict[str, dict[str, tuple[str, str]]] = {MODULE: {}, OURS_MODULE: {}}
    for classname, name, outcome in sdist.cases(report):
        module, _, cls = classname.rpartition(".")
        results.setdefault(module.replace(".", "/") + ".py", {})[f"{cls}::{name}"] = outcome
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path,
                        help="keep the sdist and the virtualenvs here and reuse them (default: a temporary directory)")
    parser.add_argument("--no-mitmproxy", action="store_true",
                        help="don't install mitmproxy: the TestMitmProxy tests skip for both handlers")
    args = parser.parse_args()
    version = sdist.pinned("requirements.txt", "scrapy")
    with sdist.workdir(args.workdir, "scrapy-handler-tests-") as directory:
        source = sdist.fetch(version, directory)
        write_ours(source, version)
        python = sdist.test_virtualenv(directory / "venv", source)
        mitmdump = None
        if not args.no_mitmproxy:
            sdist.virtualenv(directory / "mitmproxy-venv", "mitmproxy")
            mitmdump = directory / "mitmproxy-venv" / "bin" / "mitmdump"
        results = outcomes(run(source, python, mitmdump))
    scrapy, ours = results[MODULE], results[OURS_MODULE]
    print(f"{'Scrapy':6}  {'ours':6}  test ({MODULE} of Scrapy {version})")
    for name in sorted(scrapy.keys() | ours.keys()):
        print(f"{scrapy.get(name, ABSENT)[0]:6}  {ours.get(name, ABSENT)[0]:6}  {name}")
    regressions = [name for name, (outcome, _) in scrapy.items() if outcome == "PASS"
                   and ours.get(name, ABSENT)[0] != "PASS"]
    others = [name for name in sorted(scrapy.keys() | ours.keys()) if name not in regressions
              and scrapy.get(name, ABSENT)[0] != ours.get(name, ABSENT)[0]]
    sdist.print_both("Pass with Scrapy's handler, not with ours", regressions, scrapy, ours)
    sdist.print_both("Other differences", others, scrapy, ours)
    count = {label: {outcome: sum(1 for o, _ in side.values() if o == outcome) for outcome in ("PASS", "FAIL", "SKIP")}
             for label, side in (("Scrapy's AiohttpDownloadHandler", scrapy), ("LeanAiohttpDownloadHandler", ours))}
    print()
    for label, numbers in count.items():
        print(f"{label}: {numbers['PASS']} passed, {numbers['FAIL']} failed, {numbers['SKIP']} skipped")
    print(f"{len(regressions)} test(s) pass with Scrapy's handler and not with ours; "
          f"{len(others)} other difference(s)")
    return 1 if regressions or not scrapy else 0


if __name__ == "__main__":
    sys.exit(main())
