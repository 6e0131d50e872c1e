"""How fast a wholesale-failing crawl stops: requests sent before the stop, from the simulator's arrival log.

    .venv/bin/python bench/guard_stop.py [--runs 3]

Each case crawls the default range (ids 1..50,000) into a throwaway SQLite
database against a fresh simulator: a wrong API_KEY, a wrong API_BASE_URL
path, answers in a shape PRODUCT_FIELDS does not describe, a key revoked
after 4,000 requests of a 20,000-id range, and an API that never answers
(API_TIMEOUT 2 s). Reports the exit code, the requests the simulator received,
the seconds from the first to the last of them (for the revocation: after the
first 401), and the requests the crawl did not send because the guard had
stopped it (``productcrawler/guard/unsent``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, SCRAPY, simulator

CASES = {
    # name: (simulator args, crawl settings (API_BASE_URL suffix under "path"), spider args)
    "wrong API_KEY": (("--api-key", "right"), {"API_KEY": "wrong"}, ()),
    "wrong path (/v2)": ((), {"path": "/v2"}, ()),
    "shape without PRODUCT_FIELDS": (("--shape", "renamed"), {}, ()),
    "key revoked after 4000": (("--revoke-after", "4000"), {}, ("-a", "end_id=20000")),
    "an API that never answers": (("--fault", "hang=1-50000@*"), {"API_TIMEOUT": "2"}, ()),
}


def run(name: str, sim_args: tuple[str, ...], settings: dict[str, str], args: tuple[str, ...]) -> str:
    settings = dict(settings)
    path = settings.pop("path", "/v1")
    with simulator(*sim_args) as sim, tempfile.TemporaryDirectory() as tmp:
        command = [SCRAPY, "crawl", "products", *args, "-s", f"API_BASE_URL={sim.url}{path}",
                   "-s", f"DATABASE_URL=sqlite:///{tmp}/products.db"]
        for key, value in settings.items():
            command += ["-s", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if k not in ("API_KEY", "API_BASE_URL", "DATABASE_URL")}
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                                check=False)
        arrivals = sim.arrivals()
    if not arrivals:
        return f"{name}: exit {result.returncode}, no request"
    line = (f"{name}: exit {result.returncode}, {len(arrivals)} requests over "
            f"{arrivals[-1][0] - arrivals[0][0]:.2f} s")
    first_401 = next((a[0] for a in arrivals if a[2] == 401), None)
    if first_401 is not None:
        after = sum(1 for a in arrivals if a[0] >= first_401)
        line += f"; {after} of them from the first 401 on, over {arrivals[-1][0] - first_401:.2f} s"
    unsent = re.search(r"'productcrawler/guard/unsent': (\d+)", result.stderr)
    finished = re.search(r"Finished \(\w+\) in ([0-9.]+) s", result.stderr)
    line += f"; {unsent.group(1) if unsent else 0} not sent after the stop"
    if finished:
        line += f"; finished in {finished.group(1)} s"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    for name, (sim_args, settings, args) in CASES.items():
        for _ in range(options.runs):
            print(run(name, sim_args, settings, args), flush=True)


if __name__ == "__main__":
    main()
