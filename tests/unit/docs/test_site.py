"""The docs site builds, strict, every link on it resolves, and the pages keep their conventions: a short README,
links to repository files that exist, no tracker references, and code blocks that
tests/integration/test_docs_commands.py can run (or that say why not). No broker: a few seconds (one build)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import click
import pytest
import yaml
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


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """The site as CI builds it (`mkdocs build --strict`), once for the tests that read it."""
    site = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # Material's end-of-life notice
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return site


def test_mkdocs_builds_the_site_strict(built_site):
    site = built_site
    for page in ("index.html", "getting-started/index.html", "migration/index.html", "architecture/index.html"):
        assert (site / page).is_file(), page
    # the Mermaid diagrams reach the page as the theme renders them
    assert '<pre class="mermaid">' in (site / "migration/index.html").read_text()


class _Html(HTMLParser):
    """A page's anchors (id and name attributes) and its links (href and src, with the tag)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: set[str] = set()
        self.links: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.anchors.add(value)
            elif key in ("href", "src") and value is not None:
                self.links.append(value)


def broken_links(site: Path, repo_url: str, root: Path = ROOT) -> list[str]:
    """Every link of the built site's pages that does not resolve: to a file the site does not have, to an anchor its
    page does not have, or to a repository file (`repo_url`/blob|tree/BRANCH/path) that `root` does not have."""
    parsed: dict[Path, _Html] = {}

    def page(path: Path) -> _Html:
        if path not in parsed:
            parsed[path] = _Html(path.read_text(errors="replace"))
        return parsed[path]

    repo = re.compile(re.escape(repo_url.rstrip("/")) + r"/(?:blob|tree)/[^/]+/([^#?]*)")
    out = []
    for html in sorted(site.rglob("*.html")):
        where = html.relative_to(site).as_posix()
        for link in page(html).links:
            if m := repo.match(link):
                if not (root / unquote(m.group(1))).exists():
                    out.append(f"{where}: {link} (not a file of the repository)")
                continue
            url = urlsplit(urljoin(f"http://site.invalid/{where}", link))
            if url.netloc != "site.invalid":
                continue  # another site's address
            target = site / unquote(url.path).lstrip("/")
            if url.path.endswith("/"):
                target = target / "index.html"
            if not target.is_file():
                out.append(f"{where}: {link} (no such file on the site)")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in page(target).anchors:
                out.append(f"{where}: {link} (no such anchor)")
    return out


def _repo_url() -> str:
    return str(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["repo_url"])


def test_every_link_on_the_built_site_resolves(built_site):
    assert len(list(built_site.rglob("*.html"))) > 10
    broken = broken_links(built_site, _repo_url())
    assert not broken, "links that do not resolve on the built site:\n" + "\n".join(broken)


def test_the_readmes_links_into_the_docs_name_anchors_the_site_has(built_site):
    """README.md is not on the site, but its links into docs/ (`docs/migration.md#4-cut-over`) must name a heading
    the built page has."""
    missing = []
    for target in LINK.findall((ROOT / "README.md").read_text()):
        path, _, anchor = target.partition("#")
        if not path.startswith("docs/") or not path.endswith(".md") or not anchor:
            continue
        page = path.removeprefix("docs/").removesuffix(".md")
        html = built_site / ("index.html" if page == "index" else f"{page}/index.html")
        if not html.is_file() or anchor not in _Html(html.read_text()).anchors:
            missing.append(target)
    assert not missing, "README.md links to anchors the site does not have: " + ", ".join(missing)


def test_the_link_walk_finds_each_kind_of_broken_link(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a><a href="../b/">b</a>'
                                               '<a href="../b/#gone">no anchor</a><img src="../missing.png">'
                                               '<a href="https://x.invalid/">away</a>')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text('<a href="/bench/results/x.md">root link left as is</a>'
                                               '<a href="https://git.invalid/r/blob/main/README.md">ok</a>'
                                               '<a href="https://git.invalid/r/tree/main/no-such-dir">gone</a>')
    assert broken_links(tmp_path, "https://git.invalid/r") == [
        "a/index.html: ../b/#gone (no such anchor)",
        "a/index.html: ../missing.png (no such file on the site)",
        "b/index.html: /bench/results/x.md (no such file on the site)",
        "b/index.html: https://git.invalid/r/tree/main/no-such-dir (not a file of the repository)",
    ]


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


def _hook():
    import importlib.util

    spec = importlib.util.spec_from_file_location("repo_links", ROOT / "docs" / "hooks" / "repo_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_links_to_repository_files_go_to_the_repository_on_the_site(caplog):
    hook = _hook()
    html = ('<a href="/bench/results/">r</a> <a href="/pyproject.toml#L3">p</a> <img src="/no/such.png"> '
            '<a href="//cdn.invalid/x">cdn</a> <a href="../running/">page</a>')
    out = hook.rewrite(html, "https://git.invalid/r/", "main", ROOT, "x.md")
    assert out == ('<a href="https://git.invalid/r/tree/main/bench/results">r</a> '
                   '<a href="https://git.invalid/r/blob/main/pyproject.toml#L3">p</a> <img src="/no/such.png"> '
                   '<a href="//cdn.invalid/x">cdn</a> <a href="../running/">page</a>')
    assert [r.getMessage() for r in caplog.records] == [
        "x.md: a link to /no/such.png, which is not a file of the repository"]
    assert hook.branch_of("edit/main/docs/") == "main"
    with pytest.raises(ValueError, match="edit/BRANCH/docs/"):
        hook.branch_of("")


#: a line of a paragraph that starts like a Markdown list item: a list the Markdown did not see
LIST_AS_TEXT = re.compile(r"^\s*(?:[-*+]|\d+\.) (?!-)", re.MULTILINE)


def lists_as_text(html: str) -> list[str]:
    """The lines of `html`'s paragraphs (code left out) that look like list items."""
    paragraphs = re.findall(r"<p\b[^>]*>(.*?)</p>", re.sub(r"<code\b.*?</code>", "", html, flags=re.DOTALL),
                            flags=re.DOTALL)
    return [line.strip() for p in paragraphs for line in p.splitlines() if LIST_AS_TEXT.match(line)]


def test_no_list_reaches_the_site_as_text(built_site):
    found = [f"{html.relative_to(built_site)}: {line[:80]}" for html in sorted(built_site.rglob("*.html"))
             for line in lists_as_text(html.read_text(errors="replace"))]
    assert not found, "Markdown lists rendered as text (a blank line missing before them?):\n" + "\n".join(found)
    assert lists_as_text("<p>Intro:\n- <strong>a</strong> item\n1. another</p><p><code>- not</code></p>") == [
        "- <strong>a</strong> item", "1. another"]
