"""The docs site builds, strict, and the pages keep their conventions: a short README, links to repository files
that exist, no tracker references, and code blocks that tests/integration/test_docs_commands.py can run (or that say
why not). No broker: a few seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from click.testing import CliRunner

from tests.support import doc_blocks
from transcoder.cli import main

ROOT = Path(__file__).resolve().parents[3]
README_MAX_LINES = 200

#: "issue 12", "issues #12", "PR 7", "pull request #7", "#12" (not "&#59;", not a "#4-cut-over" anchor)
TRACKER = re.compile(r"\b(?:issues?|prs?|pull requests?|tickets?)\s*#?\d+\b|(?<![&\w])#\d+(?![\w-])", re.IGNORECASE)
#: a Markdown link's target: [text](target) or ![alt](target)
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_mkdocs_builds_the_site_strict(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's end-of-life notice
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for page in ("index.html", "getting-started/index.html", "migration/index.html", "architecture/index.html"):
        assert (site / page).is_file(), page
    # the Mermaid diagrams reach the page as the theme renders them
    assert '<pre class="mermaid">' in (site / "migration/index.html").read_text()


def test_readme_is_a_page_not_a_manual():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_no_tracker_references():
    found = []
    for path in _pages():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}" for m in TRACKER.finditer(line)]
    assert not found, "say what the behaviour is, not where it was discussed:\n" + "\n".join(found)


def test_links_to_repository_files_exist():
    """docs/ pages link to files outside docs/ from the repository root (/bench/results/...), which mkdocs leaves
    as they are; README.md links relatively. Every such target must exist."""
    missing = []
    for path in _pages():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                target = target.split("#", 1)[0]
                if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):  # an anchor, a URL, mailto:
                    continue
                if path.name == "README.md" and path.parent == ROOT:
                    resolved = ROOT / target.lstrip("/")
                elif target.startswith("/"):
                    resolved = ROOT / target.lstrip("/")
                else:
                    continue  # between pages: mkdocs --strict checks those
                if not resolved.exists():
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {target}")
    assert not missing, "links to files that do not exist:\n" + "\n".join(missing)


def test_code_blocks_follow_the_conventions():
    pages = [doc_blocks.read(p) for p in doc_blocks.doc_paths()]
    problems = [pr for page in pages for pr in page.problems]
    assert not problems, "\n".join(problems)
    # commands are shown, and every one that does not run says why
    bash = [b for page in pages for b in page.blocks if b.lang == doc_blocks.RUNS]
    assert any(b.runs for b in bash)
    assert all(b.runs or b.not_run for b in bash)


def test_the_site_builder_is_pinned():
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().split() if "==" in line)
    assert "mkdocs" in pins and "mkdocs-material" in pins and "pymdown-extensions" in pins
    dev = re.search(r"^dev = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.MULTILINE | re.DOTALL)
    assert dev is not None and '"mkdocs>=' in dev.group(1) and '"mkdocs-material>=' in dev.group(1)


def _commands(group: click.Command) -> Iterator[click.Command]:
    yield group
    if isinstance(group, click.Group):
        for sub in group.commands.values():
            yield from _commands(sub)


def test_every_transcoder_command_shown_parses(monkeypatch):
    """Each `transcoder ...` line of a ```bash block, run or not (a Kubernetes or Spark example too), names commands
    and options that exist, with values of the right type: the commands' callbacks are replaced by no-ops, so only
    click's parsing runs."""
    for command in _commands(main):
        monkeypatch.setattr(command, "callback", lambda *args, **kwargs: None)
    runner = CliRunner()
    shown = [(b, args) for p in doc_blocks.doc_paths() for b in doc_blocks.read(p).blocks
             if b.lang == doc_blocks.RUNS for args in doc_blocks.transcoder_commands(b)]
    assert len(shown) > 20
    bad = []
    for block, args in shown:
        result = runner.invoke(main, args)
        if result.exit_code != 0:
            bad.append(f"{block.where}: transcoder {' '.join(args)}\n{result.output}")
    assert not bad, "\n".join(bad)
