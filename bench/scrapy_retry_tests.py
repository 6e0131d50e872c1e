"""Scrapy's own retry tests, run against our retry middleware. By hand, like the benchmarks.

Usage (from the repository root; about a minute, most of it the download)::

    .venv/bin/python bench/scrapy_retry_tests.py

Downloads the sdist of the pinned Scrapy (``requirements.txt``) from the package
registry into a temporary directory (``pip download --no-deps --no-binary :all:``;
Scrapy's code is never copied into this repository), takes
``tests/test_downloadermiddleware_retry.py`` out of it, makes the module's
``RetryMiddleware`` our ``ApiRetryMiddleware``, runs it with pytest and prints
PASS/FAIL per test. A failing test listed in ``BY_DESIGN`` is a documented
difference: the script prints the docs sentence (docs/retries.md) that explains it (and fails
if docs/retries.md no longer has that sentence). Exit status 0 when every other test
passes and every by-design failure still fails as documented, 1 otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = "tests/test_downloadermiddleware_retry.py"
SCRAPY_IMPORT = "from scrapy.downloadermiddlewares.retry import RetryMiddleware, get_retry_request"
OURS_IMPORT = ("from scrapy.downloadermiddlewares.retry import get_retry_request\n"
               "from productcrawler.retry.middleware import ApiRetryMiddleware as RetryMiddleware")

#: Tests that fail by design -> the docs sentence (docs/retries.md) (section "Retries") that says why.
REASONS = "Retry reasons are short and stable"
DEFAULT_COUNT = "an id is retried 3 times (the default of `MAX_RETRIES`)"
BY_DESIGN = {
    "TestRetry::test_503": REASONS,
    "TestRetry::test_give_up_log_level_setting": REASONS,
    "TestRetry::test_give_up_log_level_meta": REASONS,
    "TestRetry::test_twistederrors": REASONS,
    "TestRetry::test_exception_to_retry_added": DEFAULT_COUNT,
}


def pinned_scrapy() -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        match = re.fullmatch(r"\s*scrapy==(\S+)\s*(#.*)?", line, flags=re.IGNORECASE)
        if match:
            return match.group(1)
    raise SystemExit("requirements.txt pins no scrapy version")


def fetch_module(version: str, directory: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    f"scrapy=={version}", "-d", str(directory)], check=True)
    (sdist,) = directory.glob(f"[sS]crapy-{version}.tar.gz")
    with tarfile.open(sdist) as archive:
        member = archive.getmember(f"{sdist.name[: -len('.tar.gz')]}/{MODULE}")
        source = archive.extractfile(member)
        assert source is not None
        text = source.read().decode()
    if text.count(SCRAPY_IMPORT) != 1:
        raise SystemExit(f"{MODULE} of Scrapy {version} no longer imports {SCRAPY_IMPORT!r}: adapt the swap")
    target = directory / "test_scrapy_retry.py"
    target.write_text(text.replace(SCRAPY_IMPORT, OURS_IMPORT))
    return target


def run(module: Path) -> dict[str, tuple[bool, str]]:
    report = module.parent / "report.xml"
    (module.parent / "pytest.ini").write_text("[pytest]\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                    str(module.parent), "-c", str(module.parent / "pytest.ini"), f"--junitxml={report}",
                    str(module)], cwd=module.parent, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                   capture_output=True, text=True, check=False)
    results = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        detail = "" if problem is None else (problem.get("message") or "").splitlines()[0][:150]
        results[name] = (problem is None and case.find("skipped") is None, detail)
    return results


def main() -> int:
    version = pinned_scrapy()
    readme = (ROOT / "docs" / "retries.md").read_text()
    with tempfile.TemporaryDirectory(prefix="scrapy-retry-tests-") as tmp:
        results = run(fetch_module(version, Path(tmp)))
    unexpected = 0
    for name, (passed, detail) in results.items():
        reason = BY_DESIGN.get(name)
        if passed:
            print(f"PASS  {name}" + ("  (listed as failing by design: update BY_DESIGN)" if reason else ""))
            unexpected += reason is not None
        elif reason:
            sentence = next((line.strip("- ") for line in readme.splitlines() if reason in line), None)
            print(f"FAIL  {name}  by design: {sentence or 'DOCS SENTENCE MISSING: ' + reason}")
            print(f"      {detail}")
            unexpected += sentence is None
        else:
            print(f"FAIL  {name}  {detail}")
            unexpected += 1
    passed = sum(ok for ok, _ in results.values())
    print(f"Scrapy {version} {MODULE} with ApiRetryMiddleware: {passed} of {len(results)} passed, "
          f"{len(results) - passed} failed ({sum(1 for n in BY_DESIGN if n in results)} by design, "
          f"{unexpected} unexpected)")
    return 1 if unexpected or not results else 0


if __name__ == "__main__":
    sys.exit(main())
