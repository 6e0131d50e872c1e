"""Scrapy's sdist set up to run Scrapy's own tests against ours, for ``bench/scrapy_handler_tests.py``.

The pinned versions (``requirements*.txt``), the sdist of the pinned Scrapy
downloaded from the package registry (``pip download --no-deps --no-binary :all:``;
Scrapy's code is never copied into this repository) and extracted, the swaps
that make a test module name ours, a virtualenv with Scrapy's test
requirements, a pytest session in the extracted sdist and the outcomes in its
JUnit report, and the lines that show a test's outcome on both sides. What each
script tests, and how it compares, stays in the script.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Scrapy's test requirements these runs do without: coverage, and parallel runs.
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


@contextmanager
def workdir(path: Path | None, prefix: str) -> Iterator[Path]:
    """``path`` (made if missing, kept), or a temporary directory removed at the end."""
    directory = path or Path(tempfile.mkdtemp(prefix=prefix))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        yield directory
    finally:
        if path is None:
            shutil.rmtree(directory, ignore_errors=True)


def fetch(version: str, directory: Path) -> Path:
    """Scrapy's sdist in ``directory``, extracted afresh (a previous extraction is removed); the extracted tree."""
    pip(sys.executable, "download", "--no-deps", "--no-binary", ":all:", f"scrapy=={version}", "-d", str(directory))
    (sdist,) = directory.glob(f"[sS]crapy-{version}.tar.gz")
    source = directory / sdist.name[: -len(".tar.gz")]
    if source.exists():
        shutil.rmtree(source)  # fresh: the swaps are made on Scrapy's text, never on a previous run's
    with tarfile.open(sdist) as archive:
        archive.extractall(directory, filter="data")
    return source


def swapped(text: str, swaps: tuple[tuple[str, str, int], ...], module: str, version: str) -> str:
    """``text`` (of ``module``) with each swap (old, new, how often old must occur) made; exits if a count is off."""
    for old, new, count in swaps:
        if text.count(old) != count:
            raise SystemExit(f"{module} of Scrapy {version} has {old.strip()!r} {text.count(old)} times, "
                             f"not {count}: adapt SWAPS")
        text = text.replace(old, new)
    return text


def test_requirements(source: Path, *sections: str) -> list[str]:
    """Scrapy's own list (tox.ini's ``[test-requirements]``) and what the tox ``sections`` add, less what this run
    does without."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(source / "tox.ini")
    deps = [line.split("#", 1)[0].strip() for section in ("test-requirements", *sections)
            for line in tox[section]["deps"].splitlines()]
    deps = [dep for dep in deps if not dep.startswith("{")]  # the other sections a section names
    return [dep for dep in deps if dep and re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] not in UNNEEDED]


def virtualenv(path: Path, *requirements: str) -> Path:
    """A virtualenv at ``path`` with ``requirements`` (made once: an existing one is reused)."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        pip(python, "install", *requirements)
    return python


def test_virtualenv(path: Path, source: Path, *sections: str) -> Path:
    """``virtualenv``: ``requirements.txt``, ``test_requirements``, pytest at this project's pin."""
    return virtualenv(path, "-r", str(ROOT / "requirements.txt"), *test_requirements(source, *sections),
                      f"pytest=={pinned('requirements-dev.txt', 'pytest')}")


def package_path(directory: Path) -> Path:
    """A directory for PYTHONPATH, in ``directory``: our package alone (this repository's tests/ would shadow
    Scrapy's), this checkout's even in a directory another checkout made."""
    path = directory / "path"
    path.mkdir(exist_ok=True)
    link, package = path / "productcrawler", ROOT / "productcrawler"
    if not (link.is_symlink() and link.readlink() == package):
        link.unlink(missing_ok=True)  # another checkout's (which may be gone): it would test that one's code
        link.symlink_to(package)
    return path


def pytest(python: Path, source: Path, path: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """A quiet pytest session in ``source`` with ``args``, ``path`` as PYTHONPATH and ``env`` added."""
    subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=120", *args],
                   cwd=source, env={"PATH": "/usr/bin:/bin", "HOME": str(source.parent), "PYTHONPATH": str(path),
                                    **(env or {})},
                   stdout=subprocess.DEVNULL, check=False)


def cases(report: Path) -> Iterator[tuple[str, str, tuple[str, str]]]:
    """Each test case of a JUnit report: its classname, its name and its outcome (PASS/FAIL/SKIP, and the first
    line of the failure or the skip reason)."""
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
        yield case.get("classname", ""), case.get("name", ""), outcome


def print_both(title: str, names: list[str], scrapy: dict[str, tuple[str, str]],
               ours: dict[str, tuple[str, str]]) -> None:
    """Under ``title``, each of ``names`` with its outcome and detail on Scrapy's side and on ours (nothing when
    ``names`` is empty)."""
    if names:
        print(f"\n{title}:")
        for name in names:
            for label, side in (("Scrapy", scrapy), ("ours", ours)):
                outcome, detail = side.get(name, ABSENT)
                print(f"  {name}  {label}: {outcome}  {detail}")
