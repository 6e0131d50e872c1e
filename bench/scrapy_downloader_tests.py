"""Scrapy's own downloader and engine tests, run with Scrapy's Downloader and with our LeanDownloader. By hand.

Usage (from the repository root; 3-4 minutes for the virtualenv, then about
1.5 minutes per reactor, 6 for the four; --workdir keeps the virtualenv for next time)::

    .venv/bin/python bench/scrapy_downloader_tests.py [--workdir /tmp/downloader-tests] [--reactors asyncio,default]

Downloads the sdist of the pinned Scrapy (``requirements.txt``) from the package
registry (``pip download --no-deps --no-binary :all:``; Scrapy's code is never
copied into this repository), extracts it, and makes a second copy of it in
which every crawler's downloader is ours: a pytest plugin written next to our
package sets ``scrapy.settings.default_settings.DOWNLOADER`` to
:class:`productcrawler.downloader.LeanDownloader` before the tests run (and
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
import configparser
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
OURS_CLASS = "productcrawler.downloader.LeanDownloader"
OURS_IMPORT = "from productcrawler.downloader import LeanDownloader as Downloader\n"
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
#: Scrapy's test requirements this run does without: coverage, and parallel runs.
UNNEEDED = {"coverage", "pytest-cov", "pytest-xdist"}
#: The outcome of a test that did not run at all on one side.
ABSENT = ("ABSENT", "")


def pinned(requirements: str, name: str) -> str:
    for line in (ROOT / requirements).read_text().splitlines():
        match = re.fullmatch(rf"\s*{re.escape(name)}==(\S+)\s*(#.*)?", line, flags=re.IGNORECASE)
        if match:
            return match.group(1)
    raise SystemExit(f"{requirements} pins no {name} version")


def pip(python: Path | str, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", *args], check=True)


def fetch_sdist(version: str, directory: Path) -> tuple[Path, Path]:
    """Scrapy's sdist, extracted, and a copy of it whose tests name our downloader where they name Scrapy's."""
    pip(sys.executable, "download", "--no-deps", "--no-binary", ":all:", f"scrapy=={version}", "-d", str(directory))
    (sdist,) = directory.glob(f"[sS]crapy-{version}.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(directory, filter="data")
    source = directory / sdist.name[: -len(".tar.gz")]
    ours = directory / f"{source.name}-lean"
    shutil.copytree(source, ours)
    for module, swaps in SWAPS.items():
        text = (source / module).read_text()
        for old, new, count in swaps:
            if text.count(old) != count:
                raise SystemExit(f"{module} of Scrapy {version} has {old.strip()!r} {text.count(old)} times, "
                                 f"not {count}: adapt SWAPS")
            text = text.replace(old, new)
        (ours / module).write_text(text)
    return source, ours


def test_requirements(source: Path) -> list[str]:
    """Scrapy's own list (tox.ini), and what its reactorless environment adds, less what this run does without."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(source / "tox.ini")
    deps = [line.split("#", 1)[0].strip() for section in ("test-requirements", "testenv:no-reactor")
            for line in tox[section]["deps"].splitlines()]
    deps = [dep for dep in deps if not dep.startswith("{")]  # the other sections it names
    return [dep for dep in deps if dep and re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] not in UNNEEDED]


def virtualenv(path: Path, *requirements: str) -> Path:
    """A virtualenv at ``path`` with ``requirements`` (made once: an existing one is reused)."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        pip(python, "install", *requirements)
    return python


def plugins_path(workdir: Path) -> Path:
    """A directory for PYTHONPATH: our package alone (this repository's tests/ would shadow Scrapy's), the plugins."""
    path = workdir / "path"
    path.mkdir(exist_ok=True)
    link = path / "productcrawler"
    if not link.exists():
        link.symlink_to(ROOT / "productcrawler")
    (path / f"{PLUGIN}.py").write_text(PLUGIN_TEXT)
    (path / f"{UVLOOP_PLUGIN}.py").write_text(UVLOOP_PLUGIN_TEXT)
    return path


def run(source: Path, python: Path, path: Path, reactor: str, plugins: tuple[str, ...]) -> Path:
    """The modules in one pytest session on ``reactor``; the JUnit report's path."""
    report = source.parent / f"report-{source.name}-{reactor}.xml"
    arguments, common = REACTORS[reactor]
    loaded = [argument for plugin in (*common, *plugins) for argument in ("-p", plugin)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(source.parent), "PYTHONPATH": str(path)}
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=120", *arguments,
                    *loaded, f"--junitxml={report}", *MODULES],
                   cwd=source, env=env, stdout=subprocess.DEVNULL, check=False)
    return report


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """test ("module.Class::test") -> (PASS/FAIL/SKIP, first line of the failure or skip reason)."""
    results: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            message = problem.get("message") or ""
            outcome = ("FAIL", message.splitlines()[0][:150] if message else "")
        elif skipped is not None:
            outcome = ("SKIP", (skipped.get("message") or "")[:150])
        else:
            outcome = ("PASS", "")
        name = f"{case.get('classname')}::{case.get('name')}"
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
    for title, selected in (("Pass with Scrapy's downloader, not with ours", regressions),
                            ("Other differences", others)):
        if selected:
            print(f"\n{title} (--reactor {reactor}):")
            for name in selected:
                for label, side in (("Scrapy", scrapy), ("ours", ours)):
                    outcome, detail = side.get(name, ABSENT)
                    print(f"  {name}  {label}: {outcome}  {detail}")
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
    version = pinned("requirements.txt", "scrapy")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="scrapy-downloader-tests-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = {}
    try:
        for stale in (workdir / f"scrapy-{version}", workdir / f"scrapy-{version}-lean"):
            if stale.exists():
                shutil.rmtree(stale)  # fresh: the swaps are made on Scrapy's text, never on a previous run's
        source, ours = fetch_sdist(version, workdir)
        python = virtualenv(workdir / "venv", "-r", str(ROOT / "requirements.txt"), *test_requirements(source),
                            f"pytest=={pinned('requirements-dev.txt', 'pytest')}")
        path = plugins_path(workdir)
        for reactor in reactors:
            results[reactor] = (outcomes(run(source, python, path, reactor, ())),
                                outcomes(run(ours, python, path, reactor, (PLUGIN,))))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"Scrapy {version}'s tests: {', '.join(MODULES)}")
    failed = {reactor: compare(reactor, *sides) for reactor, sides in results.items()}
    print()
    for reactor, names in failed.items():
        print(f"--reactor {reactor}: {len(names)} test(s) pass with Scrapy's downloader and not with ours")
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
