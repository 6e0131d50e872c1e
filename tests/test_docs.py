"""The docs site builds with no warning: a broken link, a missing page or a bad nav entry fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: mkdocs-material prints a banner about MkDocs 2 on every build; it says nothing about these docs.
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            env=QUIET, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    # The check above is only worth something if strict mode turns a broken link into a failure.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nSee [the missing page](missing.md).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: x\nstrict: true\nnav:\n  - Home: index.md\n")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            env=QUIET, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "missing.md" in result.stderr


def test_the_design_notes_have_every_section_the_code_points_to() -> None:
    from markdown.extensions.toc import slugify

    notes = (ROOT / "docs" / "design-notes.md").read_text(encoding="utf-8")
    anchors = {slugify(line.lstrip("#").strip(), "-") for line in notes.splitlines() if line.startswith("## ")}
    pointed = {match.group(1) for path in (ROOT / "productcrawler").rglob("*.py")
               for match in re.finditer(r"design-notes\.md#([a-z0-9-]+)", path.read_text(encoding="utf-8"))}
    assert pointed, "no comment points to the design notes: the pattern is wrong"
    assert pointed <= anchors, sorted(pointed - anchors)
