"""Deploy to a real scrapyd with scrapyd-deploy, schedule ``products``, check the rows and the log.

One scrapyd per module, in a temporary directory, with basic authentication
on. The project is deployed from a copy of the work tree (what git would
check out, plus files not ignored), because scrapyd-deploy writes
``setup.py``, ``build/`` and ``*.egg-info`` next to ``scrapy.cfg``. The jobs
run with no path to the work tree, so everything they import comes from the
egg.
"""

from __future__ import annotations

import base64
import configparser
import json
import queue
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from simulator import catalog
from simulator.process import stop_process
from tests.support.catalogue import assert_pass_complete, assert_resumed, done_ids
from tests.support.crawls import ROOT, crawl_env, read_lines
from tests.support.services import mysql_query

if TYPE_CHECKING:
    from collections.abc import Iterator

    from simulator.process import SimulatorProcess

PROJECT = "productcrawler"
USERNAME = "deployer"
SCRAPYD_DEPLOY = Path(sys.executable).with_name("scrapyd-deploy")
# 127.0.0.1 must never go through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Scrapyd:
    """``scrapyd`` in ``directory``, listening on the first free port of a few random candidates.

    scrapyd cannot listen on port 0 (``http_port = 0`` turns its TCP server
    off), so each candidate is tried by starting scrapyd on it: nothing binds
    a port to find it free and then releases it for someone else to take.
    """

    def __init__(self, directory: Path, password: str) -> None:
        self.directory = directory
        self.password = password
        self.port = 0
        self.log: list[str] = []
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def environment(self) -> dict[str, str]:
        # No PYTHONPATH to the work tree and no settings module: a job gets
        # the project from its egg or not at all.
        env = crawl_env()
        for name in ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE", "SCRAPYD_USERNAME", "SCRAPYD_PASSWORD",
                     "SCRAPYD_HTTP_PORT", "SCRAPYD_BIND_ADDRESS"):
            env.pop(name, None)
        return env

    def start(self, attempts: int = 8) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for port in random.sample(range(20000, 32000), attempts):
            if self._start_on(port):
                self.port = port
                return
        raise RuntimeError(f"scrapyd did not start on any of {attempts} ports:\n" + "".join(self.log[-40:]))

    def _start_on(self, port: int) -> bool:
        (self.directory / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            "bind_address = 127.0.0.1\n"
            f"http_port = {port}\n"
            f"username = {USERNAME}\n"
            f"password = {self.password}\n"
            "eggs_dir = eggs\nlogs_dir = logs\ndbs_dir = dbs\n"
            "poll_interval = 0.5\nmax_proc = 2\n")
        self.log = []
        lines: queue.Queue[str | None] = queue.Queue()
        process = subprocess.Popen([sys.executable, "-m", "scrapyd"], cwd=self.directory,
                                   env=self.environment(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=read_lines, args=(process.stdout, lines, self.log), daemon=True).start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:  # it exited
                break
            if f"Site starting on {port}" in line:
                self._process = process
                return True
        stop_process(process)
        if any("Address already in use" in line for line in self.log):
            return False
        raise RuntimeError(f"scrapyd did not start on port {port}:\n" + "".join(self.log[-40:]))

    def stop(self) -> None:
        if self._process is None:
            return
        # Jobs outlive scrapyd: kill any that a failed test left running.
        try:
            for job in self.call("listjobs.json")["running"]:
                self.call("cancel.json", [("project", job["project"]), ("job", job["id"]), ("signal", "KILL")])
        except (OSError, ValueError, KeyError):
            pass
        stop_process(self._process)
        self._process = None

    def call(self, endpoint: str, data: list[tuple[str, str]] | None = None, *,
             auth: bool = True) -> Any:
        body = None if data is None else urllib.parse.urlencode(data).encode()
        request = urllib.request.Request(self.url + endpoint, data=body)
        if auth:
            token = base64.b64encode(f"{USERNAME}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        with _OPENER.open(request, timeout=10) as response:
            raw = response.read().decode()
        return json.loads(raw) if endpoint.split("?", 1)[0].endswith(".json") else raw




@pytest.fixture(scope="module")
def scrapyd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapyd]:
    server = Scrapyd(tmp_path_factory.mktemp("scrapyd"), password=uuid.uuid4().hex)
    # The jobs must not be able to import the project from anywhere but the egg.
    probe = subprocess.run([sys.executable, "-c", "import productcrawler"], cwd=server.directory,
                           env=server.environment(), capture_output=True, text=True, check=False)
    assert probe.returncode != 0, "productcrawler is importable without the egg: the test would prove nothing"
    server.start()
    try:
        yield server
    finally:
        server.stop()


def project_copy(destination: Path, scrapyd_url: str | None = None) -> Path:
    """The files git would deploy from this work tree, with ``[deploy]`` pointed at ``scrapyd_url``.

    The password comes from the environment (``${SCRAPYD_PASSWORD}``, which
    scrapyd-client expands), never from the file.
    """
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    config = configparser.ConfigParser(interpolation=None)
    config.read(destination / "scrapy.cfg")
    assert config.get("deploy", "project") == PROJECT
    if scrapyd_url is not None:
        config.set("deploy", "url", scrapyd_url)
        config.set("deploy", "username", USERNAME)
        config.set("deploy", "password", "${SCRAPYD_PASSWORD}")
    with (destination / "scrapy.cfg").open("w") as stream:
        config.write(stream)
    return destination


def deploy(project: Path, password: str | None) -> subprocess.CompletedProcess[str]:
    assert SCRAPYD_DEPLOY.exists(), f"{SCRAPYD_DEPLOY} is missing: pip install scrapyd-client"
    env = crawl_env()
    env.pop("PYTHONPATH", None)
    env.pop("SCRAPYD_PASSWORD", None)
    if password is not None:
        env["SCRAPYD_PASSWORD"] = password
    return subprocess.run([str(SCRAPYD_DEPLOY)], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def deployed(scrapyd: Scrapyd, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    project = project_copy(tmp_path_factory.mktemp("project"), scrapyd.url)
    result = deploy(project, scrapyd.password)
    assert result.returncode == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout)
    assert answer["status"] == "ok" and answer["project"] == PROJECT, answer
    return answer


def schedule(scrapyd: Scrapyd, *, start_id: int, end_id: int, settings: dict[str, str]) -> str:
    data = [("project", PROJECT), ("spider", "products"),
            ("start_id", str(start_id)), ("end_id", str(end_id))]
    data += [("setting", f"{name}={value}") for name, value in settings.items()]
    answer = scrapyd.call("schedule.json", data)
    assert answer["status"] == "ok", answer
    return answer["jobid"]


def wait_until_finished(scrapyd: Scrapyd, job: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = scrapyd.call(f"listjobs.json?project={PROJECT}")
        for finished in jobs["finished"]:
            if finished["id"] == job:
                return finished
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not finish within {timeout:g} s:\n" + "".join(scrapyd.log[-40:]))


def process_outcome(scrapyd: Scrapyd, job: str) -> str:
    """``finished`` or ``died: exitstatus=N``, as scrapyd's own log says."""
    for line in scrapyd.log:
        if f"job='{job}'" in line:
            found = re.search(r"Process (finished|died: exitstatus=\d+)", line)
            if found:
                return found[1]
    raise AssertionError(f"scrapyd logged no end for job {job}")


# --- tests -------------------------------------------------------------------


def test_the_egg_holds_every_module_of_the_package(tmp_path: Path) -> None:
    project = project_copy(tmp_path / "project")
    egg = tmp_path / "productcrawler.egg"
    assert SCRAPYD_DEPLOY.exists(), f"{SCRAPYD_DEPLOY} is missing: pip install scrapyd-client"
    env = crawl_env()
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(SCRAPYD_DEPLOY), "--build-egg", str(egg)], cwd=project, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr

    with zipfile.ZipFile(egg) as archive:
        contents = set(archive.namelist())
        entry_points = archive.read("EGG-INFO/entry_points.txt").decode()
    # The package's code: its Python modules and the Lua scripts it loads into Redis.
    modules = {path.relative_to(project).as_posix() for pattern in ("*.py", "*.lua")
               for path in (project / PROJECT).rglob(pattern)}
    assert modules, "no modules found in the project copy"
    assert modules - contents == set()
    # Everything the crawl reads at run time is code: no data files to miss.
    package_files = {path.relative_to(project).as_posix() for path in (project / PROJECT).rglob("*")
                     if path.is_file() and "__pycache__" not in path.parts}
    assert package_files == modules
    # Only the crawler: not the simulator, the tests or the benchmarks that sit beside it.
    assert {name.split("/", 1)[0] for name in contents} == {PROJECT, "EGG-INFO"}, sorted(contents)
    assert re.search(r"^settings = productcrawler\.settings$", entry_points, re.MULTILINE), entry_points


def test_deploy_without_the_password_is_refused(scrapyd: Scrapyd, tmp_path: Path) -> None:
    project = project_copy(tmp_path / "project", scrapyd.url)
    result = deploy(project, password="wrong")
    assert result.returncode != 0
    assert "Deploy failed (401)" in result.stderr
    with pytest.raises(urllib.error.HTTPError) as refused:
        scrapyd.call("listprojects.json", auth=False)
    assert refused.value.code == 401


def test_scheduled_job_crawls_into_mysql_with_a_clean_log(
        scrapyd: Scrapyd, deployed: dict[str, Any], clean_simulator: SimulatorProcess,
        mysql_url: str) -> None:
    assert deployed["spiders"] == 1
    assert scrapyd.call(f"listspiders.json?project={PROJECT}")["spiders"] == ["products"]
    end = 300
    job = schedule(scrapyd, start_id=1, end_id=end,
                   settings={"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url})
    finished = wait_until_finished(scrapyd, job)
    assert process_outcome(scrapyd, job) == "finished"

    log = scrapyd.call(finished["log_url"].lstrip("/"))
    assert not re.search(r"\] (ERROR|CRITICAL):", log), log[-3000:]
    missing = [i for i in range(1, end + 1) if catalog.is_missing(i)]
    assert "Finished (finished) in" in log
    assert f"{end - len(missing)} stored, {len(missing)} missing, 0 failed in this run" in log
    stored = [row[0] for row in mysql_query(mysql_url, "SELECT product_id FROM products ORDER BY product_id")]
    assert stored == [i for i in range(1, end + 1) if i not in missing]
    assert mysql_query(mysql_url, "SELECT COUNT(*) FROM crawl_failures WHERE outcome = 'missing'")[0][0] == len(
        missing)


def test_a_configuration_error_fails_the_job_with_one_clear_line(
        scrapyd: Scrapyd, deployed: dict[str, Any], clean_simulator: SimulatorProcess) -> None:
    job = schedule(scrapyd, start_id=1, end_id=10,
                   settings={"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": "oracle://db/x"})
    wait_until_finished(scrapyd, job)
    assert process_outcome(scrapyd, job) == "died: exitstatus=2"
    assert any("productcrawler: configuration error: DATABASE_URL=" in line and "unknown scheme" in line
               for line in scrapyd.log), "".join(scrapyd.log[-20:])


def test_a_cancelled_job_stops_cleanly_and_leaves_the_pass_to_resume(
        scrapyd: Scrapyd, deployed: dict[str, Any], clean_simulator: SimulatorProcess,
        mysql_url: str) -> None:
    end = 2000  # 10 s at 200/s: cancelled after its first rows, the job stops mid-pass
    settings = {"API_BASE_URL": clean_simulator.base_url, "DATABASE_URL": mysql_url,
                "MAX_REQUESTS_PER_SECOND": "200"}
    job = schedule(scrapyd, start_id=1, end_id=end, settings=settings)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if mysql_query(mysql_url, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s "
                       "AND table_name = 'products'", (mysql_url.rsplit("/", 1)[1],))[0][0]:
            if mysql_query(mysql_url, "SELECT COUNT(*) FROM products")[0][0] > 0:
                break
        time.sleep(0.3)
    else:
        raise AssertionError("the job stored nothing within 30 s:\n" + "".join(scrapyd.log[-40:]))

    assert scrapyd.call("cancel.json", [("project", PROJECT), ("job", job)])["prevstate"] == "running"
    finished = wait_until_finished(scrapyd, job, timeout=30)
    # scrapyd's cancel (SIGINT) is an operator's stop: exit 0, the next run resumes.
    assert process_outcome(scrapyd, job) == "finished"
    log = scrapyd.call(finished["log_url"].lstrip("/"))
    assert "Finished (shutdown) in" in log
    stopped = re.search(rf"Pass 1 is not complete \((\d+) of {end} ids done; stop reason: shutdown\)", log)
    assert stopped, log[-2000:]
    assert not re.search(r"\] (ERROR|CRITICAL):", log), log[-3000:]

    # The next job resumes the pass where the cancelled one stopped, and completes it.
    done_before = done_ids(mysql_url)
    assert len(done_before) == int(stopped[1]) < end
    sent_before = len(clean_simulator.arrivals())
    # Faster: this job has only to finish the pass.
    job = schedule(scrapyd, start_id=1, end_id=end, settings={**settings, "MAX_REQUESTS_PER_SECOND": "1000"})
    finished = wait_until_finished(scrapyd, job, timeout=60)
    assert process_outcome(scrapyd, job) == "finished"
    log = scrapyd.call(finished["log_url"].lstrip("/"))
    assert f"Resuming pass 1 over ids 1..{end}: {len(done_before)} of {end} already done" in log, log[-2000:]
    assert "Finished (finished) in" in log
    assert_resumed(clean_simulator.arrivals()[sent_before:], done_before, end, use_redis=False)
    assert_pass_complete(mysql_url, end)
