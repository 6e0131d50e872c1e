"""Shared pieces of the bench scripts: the simulator, child processes measured with wait4, cleanup.

Everything talks to 127.0.0.1 only. A child is measured with ``os.wait4``, so its
CPU (user + sys, all its threads) and peak RSS are its own even when other
children run at the same time.
"""

from __future__ import annotations

import bisect
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PYTHON = sys.executable
SCRAPY = str(Path(PYTHON).with_name("scrapy"))
MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
REDIS_URL = "redis://127.0.0.1:6379/0"
CATALOG_VERSION = "490000"

sys.path.insert(0, str(ROOT))

from simulator.process import SimulatorProcess  # noqa: E402


def simulator(*args: str) -> SimulatorProcess:
    return SimulatorProcess("--catalog-version", CATALOG_VERSION, *args)


@dataclass
class Run:
    """One measured child process."""

    name: str
    cpu: float  # user + sys seconds of the child
    wall: float
    maxrss_mb: float
    returncode: int
    responses: int = 0  # product requests the simulator answered during the run
    ok: int = 0  # 200 answers
    stored: int | None = None  # rows written (when the run stores)
    extra: dict[str, Any] = field(default_factory=dict)
    stderr_tail: str = ""

    @property
    def ms_per_response(self) -> float:
        return 1000.0 * self.cpu / self.responses if self.responses else float("nan")

    @property
    def ms_per_stored(self) -> float:
        count = self.stored if self.stored is not None else self.ok
        return 1000.0 * self.cpu / count if count else float("nan")


def run_measured(name: str, command: list[str], *, cwd: Path | str = ROOT, env: dict[str, str] | None = None,
                 timeout: float = 600.0, stop_after: float | None = None, log_path: Path | None = None) -> Run:
    """Run ``command``, wait for it with wait4 and return its CPU, wall time and peak RSS.

    ``stop_after``: send SIGINT after that many seconds (a graceful Scrapy stop),
    SIGKILL ``timeout`` seconds after start if it is still running.
    """
    child_env = dict(os.environ)
    child_env.pop("SCRAPY_SETTINGS_MODULE", None)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), child_env.get("PYTHONPATH"))))
    if env:
        child_env.update(env)
    log = open(log_path or os.devnull, "wb")
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    timers = []
    if stop_after is not None:
        timers.append(threading.Timer(stop_after, _signal, (process.pid, signal.SIGINT)))
    timers.append(threading.Timer(timeout, _signal, (process.pid, signal.SIGKILL)))
    for timer in timers:
        timer.daemon = True
        timer.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    for timer in timers:
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    log.close()
    tail = ""
    if log_path is not None:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    return Run(name, usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024.0,
               process.returncode, stderr_tail=tail,
               extra={"user": usage.ru_utime, "sys": usage.ru_stime, "ctx_switches": usage.ru_nvcsw + usage.ru_nivcsw})


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


# --- MySQL and Redis: created per run, removed afterwards -------------------------------

def mysql_connect(database: str | None = None) -> Any:
    import pymysql

    return pymysql.connect(**MYSQL, database=database, autocommit=True)


def create_database(prefix: str = "bench") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    conn = mysql_connect()
    with conn.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    conn.close()
    return name


def drop_database(name: str) -> None:
    conn = mysql_connect()
    with conn.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {name}")
    conn.close()


def count_rows(database: str, table: str = "products") -> int:
    conn = mysql_connect(database)
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")
            return int(cursor.fetchone()[0])
    except Exception:  # noqa: BLE001 - the table may not exist if the run failed early
        return 0
    finally:
        conn.close()


def redis_client() -> Any:
    import redis

    return redis.Redis.from_url(REDIS_URL)


def redis_used_memory() -> int:
    return int(redis_client().info("memory")["used_memory"])


def redis_keys_memory(prefix: str) -> dict[str, int]:
    """MEMORY USAGE of every key under ``prefix`` (bytes, key and value with overhead)."""
    client = redis_client()
    sizes = {}
    for key in _prefixed_keys(client, prefix):
        size = client.memory_usage(key, samples=0)
        if size is not None:
            sizes[key.decode()] = int(size)
    return sizes


def _prefixed_keys(client: Any, prefix: str) -> list[bytes]:
    """Keys under ``prefix``: the pass's are "{prefix}:..." (its cluster hash tag)."""
    return [key for pattern in (f"{prefix}*", f"{{{prefix}}}*") for key in client.scan_iter(pattern, count=1000)]


def delete_redis_prefix(prefix: str) -> int:
    client = redis_client()
    keys = _prefixed_keys(client, prefix)
    for start in range(0, len(keys), 500):
        client.delete(*keys[start:start + 500])
    return len(keys)


def unique_prefix(name: str = "bench") -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# --- commands ---------------------------------------------------------------------------------

def project_settings() -> dict[str, Any]:
    """The project's settings module as a dict (read in a child so nothing is cached here)."""
    out = subprocess.run([PYTHON, "-c", "import json, productcrawler.settings as s; "
                          "print(json.dumps({k: getattr(s, k) for k in dir(s) if k.isupper()}))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def downloader_middlewares(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The project's DOWNLOADER_MIDDLEWARES with ``overrides`` on top."""
    return {**project_settings()["DOWNLOADER_MIDDLEWARES"], **(overrides or {})}


def busiest_window(times: list[float], width: float = 1.0) -> int:
    """The most requests in any ``width``-second window of arrival ``times``."""
    times = sorted(times)
    return max((bisect.bisect_left(times, t + width) - i for i, t in enumerate(times)), default=0)


def crawl_command(start: int, end: int, base_url: str, settings: dict[str, Any]) -> list[str]:
    command = [SCRAPY, "crawl", "products", "-a", f"start_id={start}", "-a", f"end_id={end}",
               "-s", f"API_BASE_URL={base_url}"]
    for name, value in settings.items():
        text = json.dumps(value) if isinstance(value, (dict, list, bool)) or value is None else str(value)
        command += ["-s", f"{name}={text}"]
    return command


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem_kb = 0
    versions = subprocess.run(
        [PYTHON, "-c", "from importlib.metadata import version as v; "
         "print(' '.join(f'{n}=={v(n)}' for n in ('scrapy', 'twisted', 'aiohttp', 'redis', "
         "'pymysql', 'aiomysql')))"], capture_output=True, text=True).stdout.split()
    return {"nproc": str(os.cpu_count()), "cpu": model, "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
            "python": platform.python_version(), "kernel": platform.release(), "packages": " ".join(versions)}
