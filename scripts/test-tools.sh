#!/usr/bin/env bash
# The programs the test suite runs besides Python: each is checked, and the
# Debian package that has it is installed where it is missing (as root, with
# apt-get), so that `make test` passes on a fresh machine. Without root or
# apt-get it names what to install and fails.
#   mariadbd, mariadb-install-db (mariadb-server), redis-server (redis-server),
#   redis-cli (redis-tools): tests/support/servers.py starts TLS and cluster servers of its own;
#   promtool (prometheus): checks and unit-tests the alert rules;
#   prometheus-pushgateway: the Pushgateway a crawl pushes its pass summary to;
#   amtool (prometheus-alertmanager): checks the Alertmanager configuration;
#   initdb, postgres (postgresql, Debian's 15 under /usr/lib/postgresql/15/bin): tests/support/postgres.py.
set -euo pipefail

pairs=(mariadbd:mariadb-server mariadb-install-db:mariadb-server redis-server:redis-server
       redis-cli:redis-tools promtool:prometheus prometheus-pushgateway:prometheus-pushgateway
       amtool:prometheus-alertmanager)
missing=()
for pair in "${pairs[@]}"; do
    program=${pair%%:*}
    command -v "$program" >/dev/null || [ -x "/usr/sbin/$program" ] || [ -x "/usr/bin/$program" ] \
        || missing+=("${pair#*:}")
done
[ -x /usr/lib/postgresql/15/bin/initdb ] && [ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0

packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "test tools: missing programs; install these packages: $packages" >&2
    exit 1
fi
echo "test tools: installing $packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086 - one word per package
apt-get install -y -qq --no-install-recommends $packages >/dev/null
# Debian's packages start their services on install; the suite starts its own servers.
for service in prometheus prometheus-pushgateway prometheus-alertmanager prometheus-node-exporter postgresql; do
    if command -v systemctl >/dev/null; then systemctl stop "$service" 2>/dev/null || true; fi
done
