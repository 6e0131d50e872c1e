"""Summarise a py-spy ``--format raw`` profile: self and inclusive share per function.

Usage: .venv/bin/python bench/pyspy_top.py PROFILE.txt [--top 40] [--by function|file]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--by", choices=("function", "file"), default="function")
    args = parser.parse_args()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_name(f, args.by) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    print(f"{total} samples")
    print(f"\n{'self %':>7}  function")
    for name, count in own.most_common(args.top):
        print(f"{100 * count / total:7.1f}  {name}")
    print(f"\n{'incl %':>7}  function")
    for name, count in inclusive.most_common(args.top):
        print(f"{100 * count / total:7.1f}  {name}")
    return 0


def _name(frame: str, by: str) -> str:
    # "function (path/to/file.py:123)"
    match = re.match(r"(.*) \((.*?):(\d+)\)$", frame)
    if not match:
        return frame
    function, path = match.group(1), match.group(2)
    short = re.sub(r".*site-packages/", "", path)
    short = re.sub(r".*/lib/python3\.\d+/", "stdlib/", short)
    short = short.removeprefix(f"{ROOT}/")
    return short if by == "file" else f"{function} ({short})"


if __name__ == "__main__":
    sys.exit(main())
