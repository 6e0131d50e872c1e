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


#: Where the docs name the code: repository paths (``ratelimit/handler.py`` is under productcrawler/),
#: not the tail of a URL (``localhost:6800/schedule.json``).
_PATH = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)+[\w.-]+\.(?:py|lua|sh|toml|ya?ml|json|txt|cfg|ini|md))\b")
_MODULE = re.compile(r"\bproductcrawler(?:\.[a-z_]\w*)+")


def named_in_the_docs(pattern: re.Pattern[str]) -> set[tuple[str, str]]:
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "BENCHMARKS.md"]
    return {(page.name, match.group(1) if pattern.groups else match.group(0))
            for page in pages for match in pattern.finditer(page.read_text(encoding="utf-8"))}


def test_every_file_the_docs_name_exists() -> None:
    # "Where does this live?" is what the docs answer: a file moved or renamed must take its mentions along.
    named = named_in_the_docs(_PATH)
    assert len(named) > 50, "too few paths found: the pattern is wrong"
    gone = sorted((page, path) for page, path in named
                  if not any(place.exists() for place in (ROOT / path, ROOT / "productcrawler" / path,
                                                          ROOT / "docs" / path)))
    assert gone == []


def test_every_module_and_name_the_docs_give_can_be_imported() -> None:
    import importlib

    def found(dotted: str) -> bool:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                thing = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attribute in parts[cut:]:
                if not hasattr(thing, attribute):
                    return False
                thing = getattr(thing, attribute)
            return True
        return False

    named = {(page, dotted) for page, dotted in named_in_the_docs(_MODULE)
             if not dotted.endswith((".json", ".egg"))}  # file names (productcrawler.json), not modules
    assert len(named) > 5, "too few names found: the pattern is wrong"
    assert sorted((page, dotted) for page, dotted in named if not found(dotted)) == []


def test_every_benchmarks_section_the_docs_cite_exists() -> None:
    # The design notes give a choice's reason and cite its figure as `BENCHMARKS.md`, "Section": a section
    # renamed or dropped must take its citations along.
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    sections = {line.lstrip("#").strip() for line in benchmarks.splitlines() if line.startswith("#")}
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    text = {page.name: " ".join(page.read_text(encoding="utf-8").split()) for page in pages}  # lines joined
    cited = {(name, match.group(1)) for name, page in text.items()
             for match in re.finditer(r'BENCHMARKS\.md`?, "([^"]+)"', page)}
    assert len(cited) > 10, "too few citations found: the pattern is wrong"
    assert sorted((page, section) for page, section in cited if section not in sections) == []


# -- no secret on a command line ------------------------------------------------------------------------
#
# The rule: in the docs' shell code (a fenced block without a language, or sh/bash/shell/console) and in
# any inline code span that is more than the assignment itself, a secret is never given a literal value:
# not `-s API_KEY=...`, `API_KEY=... scrapy crawl`, `export API_KEY=...`, `docker run -e API_KEY=...` or
# scrapyd's `setting=API_KEY=...` (a command line is readable by every user of the machine in
# /proc/PID/cmdline, and an interactive one stays in the shell's history). A secret is API_KEY's value,
# or a password inside a URL (`://user:password@`). A value the shell expands (`"$(cat /run/secrets/x)"`,
# `$API_KEY`) is allowed, and so is a masked one (`***`); file contents (```ini, ```yaml, ...) are not
# command lines.

_SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console"}
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_ASSIGNMENT = re.compile(r"(?:(?<=[\s=])|^)([A-Z][A-Z0-9_]*)=('[^']*'|\"[^\"]*\"|[^\s'\"]+)")
_URL_PASSWORD = re.compile(r"://[^/@\s:]*:(?!\*\*\*@)[^@\s/]+@")


def shell_code_and_prose(text: str) -> tuple[list[str], str]:
    """The fenced blocks of shell code in ``text``, and the text outside every fenced block."""
    blocks: list[str] = []
    prose: list[str] = []
    fence: str | None = None  # the language of the block we are in
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if fence is None:
                fence = line.lstrip()[3:].strip()
                if fence in _SHELL_LANGUAGES:
                    blocks.append("")
            else:
                fence = None
        elif fence is None:
            prose.append(line)
        elif fence in _SHELL_LANGUAGES:
            blocks[-1] += line + "\n"
    return blocks, "\n".join(prose)


def secrets_on_a_command_line(text: str) -> list[str]:
    """Each assignment in ``text``'s shell code and inline commands that gives a secret a literal value."""
    code, prose = shell_code_and_prose(text)
    code += [span for span in _INLINE.findall(prose) if not _ASSIGNMENT.fullmatch(span.strip())]
    found = []
    for piece in code:
        for match in _ASSIGNMENT.finditer(piece):
            name, value = match.group(1), match.group(2).strip("'\"")
            if value.startswith("$"):
                continue
            if (name == "API_KEY" and value != "***") or _URL_PASSWORD.search(value):
                found.append(match.group(0))
    return found


def test_the_rule_finds_secrets_on_command_lines() -> None:
    sample = """
```
.venv/bin/scrapy crawl products -s API_KEY=shpat_123
API_KEY=shpat_456 \\
  DATABASE_URL=mysql://crawler:secret@db/shop .venv/bin/scrapy crawl products
export REDIS_URL=rediss://default:pw@redis:6380/0
docker run -e API_KEY=k1 productcrawler
curl http://c:6800/schedule.json -d setting=DATABASE_URL=mysql://u:pw2@db/shop
export API_KEY="$(cat /run/secrets/api_key)" DATABASE_URL=mysql://crawler@db/shop
docker run -e API_KEY -e API_KEY_FILE=/run/secrets/api_key productcrawler
```
Inline: `scrapy crawl products -s API_KEY=k2`; a value alone: `API_KEY=user:password`, `DATABASE_URL=mysql://u:***@db/x`.
```ini
API_KEY=in-a-file
```
```
DATABASE_URL='mysql://u:pw3@db/shop?ssl_ca=/x'
```
"""
    assert secrets_on_a_command_line(sample) == [
        "API_KEY=shpat_123", "API_KEY=shpat_456", "DATABASE_URL=mysql://crawler:secret@db/shop",
        "REDIS_URL=rediss://default:pw@redis:6380/0", "API_KEY=k1", "DATABASE_URL=mysql://u:pw2@db/shop",
        "DATABASE_URL='mysql://u:pw3@db/shop?ssl_ca=/x'", "API_KEY=k2"]


def test_no_docs_page_puts_a_secret_on_a_command_line() -> None:
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "BENCHMARKS.md"]
    found = {page.name: hits for page in pages if (hits := secrets_on_a_command_line(page.read_text(encoding="utf-8")))}
    assert found == {}
