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
is :class:`productcrawler.download_handler.LeanAiohttpDownloadHandler` and the
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
MODULE = "tests/test_downloader_handler_aiohttp.py"
OURS_MODULE = "tests/test_downloader_handler_lean.py"
SCRAPY_CLASS = "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"
OURS_CLASS = "productcrawler.download_handler.LeanAiohttpDownloadHandler"
#: The swaps that make the module test our handler, and how often each must occur.
SWAPS = (
    ("from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler\n",
     "from productcrawler.download_handler import LeanAiohttpDownloadHandler as AiohttpDownloadHandler\n", 1),
    (f'"{SCRAPY_CLASS}"', f'"{OURS_CLASS}"', 2),
)
#: Scrapy's test requirements this run does without: coverage, and parallel runs.
UNNEEDED = {"coverage", "pytest-cov", "pytest-xdist"}
#: The outcome of a test that did not run at all in one of the two modules.
ABSENT = ("ABSENT", "")


def pinned(requirements: str, name: str) -> str:
    for line in (ROOT / requirements).read_text().splitlines():
        match = re.fullmatch(rf"\s*{re.escape(name)}==(\S+)\s*(#.*)?", line, flags=re.IGNORECASE)
        if match:
            return match.group(1)
    raise SystemExit(f"{requirements} pins no {name} version")


def pip(python: Path | str, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", *args], check=True)


def fetch_sdist(version: str, directory: Path) -> Path:
    """Scrapy's sdist, extracted; the test module made twice: as it is, and testing our handler."""
    pip(sys.executable, "download", "--no-deps", "--no-binary", ":all:", f"scrapy=={version}", "-d", str(directory))
    (sdist,) = directory.glob(f"[sS]crapy-{version}.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(directory, filter="data")
    source = directory / sdist.name[: -len(".tar.gz")]
    text = (source / MODULE).read_text()
    for old, new, count in SWAPS:
        if text.count(old) != count:
            raise SystemExit(f"{MODULE} of Scrapy {version} has {old.strip()!r} {text.count(old)} times, "
                             f"not {count}: adapt SWAPS")
        text = text.replace(old, new)
    (source / OURS_MODULE).write_text(text)
    return source


def test_requirements(source: Path) -> list[str]:
    """Scrapy's own list (tox.ini), less what this run does without."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(source / "tox.ini")
    deps = [line.split("#", 1)[0].strip() for line in tox["test-requirements"]["deps"].splitlines()]
    return [dep for dep in deps if dep and re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] not in UNNEEDED]


def virtualenv(path: Path, *requirements: str) -> Path:
    """A virtualenv at ``path`` with ``requirements`` (made once: an existing one is reused)."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        pip(python, "install", *requirements)
    return python


def run(source: Path, python: Path, mitmdump: Path | None) -> Path:
    """Both modules in one pytest session; the JUnit report's path."""
    report = source / "report.xml"
    path = source.parent / "path"  # our package alone: this repository's tests/ would shadow Scrapy's
    path.mkdir(exist_ok=True)
    link = path / "productcrawler"
    if not link.exists():
        link.symlink_to(ROOT / "productcrawler")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(source.parent), "PYTHONPATH": str(path)}
    if mitmdump is not None:
        env["MITMDUMP"] = str(mitmdump)
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=120",
                    "-m", "not requires_internet", f"--junitxml={report}", MODULE, OURS_MODULE],
                   cwd=source, env=env, stdout=subprocess.DEVNULL, check=False)
    return report


def outcomes(report: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """module -> test ("Class::test") -> (PASS/FAIL/SKIP, first line of the failure or skip reason)."""
    results: dict[str, dict[str, tuple[str, str]]] = {MODULE: {}, OURS_MODULE: {}}
    for case in ET.parse(report).getroot().iter("testcase"):
        module, _, cls = case.get("classname", "").rpartition(".")
        path = module.replace(".", "/") + ".py"
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
        results.setdefault(path, {})[f"{cls}::{case.get('name')}"] = outcome
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path,
                        help="keep the sdist and the virtualenvs here and reuse them (default: a temporary directory)")
    parser.add_argument("--no-mitmproxy", action="store_true",
                        help="don't install mitmproxy: the TestMitmProxy tests skip for both handlers")
    args = parser.parse_args()
    version = pinned("requirements.txt", "scrapy")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="scrapy-handler-tests-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        source = workdir / f"scrapy-{version}"
        if source.exists():
            shutil.rmtree(source)  # fresh: the swaps are made on Scrapy's text, never on a previous run's
        source = fetch_sdist(version, workdir)
        python = virtualenv(workdir / "venv", "-r", str(ROOT / "requirements.txt"), *test_requirements(source),
                            f"pytest=={pinned('requirements-dev.txt', 'pytest')}")
        mitmdump = None
        if not args.no_mitmproxy:
            virtualenv(workdir / "mitmproxy-venv", "mitmproxy")
            mitmdump = workdir / "mitmproxy-venv" / "bin" / "mitmdump"
        results = outcomes(run(source, python, mitmdump))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    scrapy, ours = results[MODULE], results[OURS_MODULE]
    print(f"{'Scrapy':6}  {'ours':6}  test ({MODULE} of Scrapy {version})")
    for name in sorted(scrapy.keys() | ours.keys()):
        print(f"{scrapy.get(name, ABSENT)[0]:6}  {ours.get(name, ABSENT)[0]:6}  {name}")
    regressions = [name for name, (outcome, _) in scrapy.items() if outcome == "PASS"
                   and ours.get(name, ABSENT)[0] != "PASS"]
    others = [name for name in sorted(scrapy.keys() | ours.keys()) if name not in regressions
              and scrapy.get(name, ABSENT)[0] != ours.get(name, ABSENT)[0]]
    for title, names in (("Pass with Scrapy's handler, not with ours", regressions),
                         ("Other differences", others)):
        if names:
            print(f"\n{title}:")
            for name in names:
                for label, side in (("Scrapy", scrapy), ("ours", ours)):
                    outcome, detail = side.get(name, ABSENT)
                    print(f"  {name}  {label}: {outcome}  {detail}")
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
