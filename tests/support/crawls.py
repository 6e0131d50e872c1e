"""The real ``scrapy crawl products`` as a subprocess: its command and environment, started,
waited for, read as it logs, and interrupted at a chosen moment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tests.support.services import stored_count

if TYPE_CHECKING:
    import queue
    from collections.abc import Callable

#: The project's root: a crawl's working directory and PYTHONPATH.
ROOT = Path(__file__).resolve().parents[2]


def crawl_env(**overrides: str) -> dict[str, str]:
    """The environment of a crawl subprocess: ours minus the contract's names, plus overrides."""
    from productcrawler.config import DEFAULTS

    env = {k: v for k, v in os.environ.items() if k not in DEFAULTS}
    env["PYTHONPATH"] = str(ROOT)
    env.update(overrides)
    return env


def verifying(certificates: Any) -> dict[str, str]:
    """A crawl's environment that trusts the test CA for the API (API_CA_FILE; the certificate is verified)."""
    return crawl_env(API_CA_FILE=str(certificates.ca))


def crawl_command(*args: str, settings: dict[str, Any] | None = None) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", "products"]
    for name, value in (settings or {}).items():
        command += ["-s", f"{name}={value}"]
    return command + list(args)


def run_crawl(*args: str, settings: dict[str, Any] | None = None, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real ``scrapy crawl products`` and wait for it."""
    return subprocess.run(crawl_command(*args, settings=settings), cwd=ROOT, env=env or crawl_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_scrapy(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
               cwd: Any = ROOT) -> subprocess.CompletedProcess[str]:
    """Run any real ``scrapy`` command of the project (``fetch``, ``shell``, ``crawl``) and wait."""
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env or crawl_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def start_crawl(*args: str, settings: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The real ``scrapy crawl products`` in the background, stdout and stderr together."""
    return subprocess.Popen(crawl_command(*args, settings=settings), cwd=ROOT, env=env or crawl_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str,
             timeout: float = 60) -> None:
    """Poll ``condition`` while ``process`` runs; fail if it ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the crawl ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.1)


def finish(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str]:
    """Wait for a crawl; on timeout kill it and fail, showing the end of its log."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"the crawl was still running after {timeout} s:\n{output[-3000:]}") from None
    return process.returncode, output


def kill_when_stored(process: subprocess.Popen[str], url: str, at_least: int, sig: int) -> None:
    """Send ``sig`` once ``at_least`` products are stored (signal 0: just wait for them)."""
    deadline = time.monotonic() + 60
    while stored_count(url) < at_least:
        if process.poll() is not None:
            raise AssertionError("the crawl ended before it could be interrupted:\n"
                                 + process.communicate()[0][-3000:])
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.1)
    process.send_signal(sig)


def wait_until_stored(process: subprocess.Popen[str], url: str, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while stored_count(url) < at_least:
        assert process.poll() is None, "the crawl ended before it could be interrupted"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.1)


def kill_after_arrivals(process: subprocess.Popen[str], simulator: Any, count: int) -> None:
    """SIGKILL the crawl once the simulator has seen ``count`` requests; it must still be running."""
    deadline = time.monotonic() + 60
    while len(simulator.arrivals()) < count:
        assert process.poll() is None, "the crawl ended before it could be killed"
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.05)
    assert process.poll() is None, "the crawl ended before it could be killed"
    process.kill()
    process.wait(timeout=30)


def read_lines(stream: IO[str], into: queue.Queue[str | None], log: list[str]) -> None:
    """Thread target: every line of ``stream`` into ``log`` and ``into``; ``None`` at its end."""
    for line in stream:
        log.append(line)
        into.put(line)
    into.put(None)


class LoggedCrawl:
    """A subprocess (a crawl, say) whose stderr is read as it is written: each line into
    ``log`` and into the queue ``lines`` (``None`` at its end). stdout is dropped."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        import queue
        import threading

        self.process = subprocess.Popen(command, cwd=ROOT, env=env or crawl_env(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=read_lines, args=(self.process.stderr, self.lines, self.log),
                                        daemon=True)
        self._reader.start()

    def wait(self, timeout: float = 180) -> tuple[int, str]:
        """The exit code and the whole log, once the process has ended."""
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code, "".join(self.log)

    def kill(self) -> None:
        """Kill the process if it still runs (a failed test's clean-up)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self._reader.join(timeout=5)
