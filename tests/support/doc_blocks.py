"""The code blocks of the docs (README.md, docs/*.md) as the tests read them: the commands a page shows, the blocks
it marks as not run and why, and the files its commands use. The conventions are docs/contributing.md's:

- ```bash blocks are commands, run by tests/integration/test_docs_commands.py; ```sh, ```shell and ```console
  blocks are refused;
- `<!-- not run: REASON -->` on the line right above a ```bash block skips it, and the reason is required;
- `<!-- file: NAME -->` on the line right above a block names a file the page's commands use (a config): it is
  written into the scratch directory before they run;
- `127.0.0.1:9092` (the local broker) and the port `9308` (the metrics port) are replaced by the test broker's
  address and a free port.

Pure: no broker, no subprocess.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the one fence whose commands run
RUNS = "bash"
#: shell fences the docs must not use: their commands would escape the test
REFUSED = frozenset({"sh", "shell", "console", "shell-session", "shellsession", "zsh"})
#: the local broker's address as the docs write it, and the metrics port
LOCAL_BOOTSTRAP = "127.0.0.1:9092"
METRICS_PORT = "9308"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not[ -]run|file)\b\s*:?\s*(?P<value>.*?)\s*-->\s*$", re.IGNORECASE)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    path: str  # the page, relative to the repository root
    line: int  # the opening fence's line, from 1
    lang: str  # the fence's language, lower case ("" when none)
    body: str  # its text, the fence's indentation removed
    marker: tuple[str, str] | None = None  # ("not run" | "file", the reason or name) from the line right above

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang == RUNS and (self.marker is None or self.marker[0] != "not run")

    @property
    def not_run(self) -> str | None:
        """The reason a ```bash block is not run, or None."""
        return self.marker[1] if self.marker and self.marker[0] == "not run" else None

    @property
    def file_name(self) -> str | None:
        return self.marker[1] if self.marker and self.marker[0] == "file" else None


@dataclass(frozen=True)
class Page:
    path: str
    blocks: tuple[Block, ...]
    problems: tuple[str, ...]  # conventions broken, each "page:line: what"


def parse(text: str, path: str = "<text>") -> Page:
    """The page's fenced blocks, each with the marker on the line right above it, and the conventions it breaks."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        marker = _MARKER.match(lines[i])
        if marker is not None and not (i + 1 < len(lines) and _FENCE.match(lines[i + 1])):
            problems.append(f"{path}:{i + 1}: a `{marker['kind']}` marker must be on the line right above a code "
                            "block")
        if m is None:
            i += 1
            continue
        start, fence, indent = i, m["fence"], len(m["indent"].expandtabs())
        lang = m["info"].lower()
        body: list[str] = []
        i += 1
        while i < len(lines) and not _closes(lines[i], fence):
            body.append(_dedent(lines[i], indent))
            i += 1
        if i == len(lines):
            problems.append(f"{path}:{start + 1}: the code block opened here is never closed")
        above = _MARKER.match(lines[start - 1]) if start > 0 else None
        mark = None
        if above is not None:
            kind = "not run" if above["kind"].lower().replace("-", " ") == "not run" else "file"
            mark = (kind, above["value"].strip())
        block = Block(path, start + 1, lang, "\n".join(body) + ("\n" if body else ""), mark)
        problems.extend(_problems(block))
        blocks.append(block)
        i += 1
    names = [b.file_name for b in blocks if b.file_name]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{path}: the file {name} is named by more than one block")
    return Page(path, tuple(blocks), tuple(problems))


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and set(s) == {fence[0]}


def _dedent(line: str, indent: int) -> str:
    """The line without the fence's indentation (a block inside a list item is indented with it)."""
    n = 0
    while n < indent and n < len(line) and line[n] in " \t":
        n += 1
    return line[n:]


def _problems(b: Block) -> list[str]:
    out = []
    if b.lang in REFUSED:
        out.append(f"{b.where}: a ```{b.lang} block: commands go in ```bash blocks (docs/contributing.md)")
    if b.marker is None:
        return out
    kind, value = b.marker
    if kind == "not run":
        if not value:
            out.append(f"{b.where}: `not run` without a reason: say why, e.g. <!-- not run: needs a Kubernetes "
                       "cluster -->")
        if b.lang != RUNS:
            out.append(f"{b.where}: `not run` marks a ```{b.lang or 'plain'} block, which never runs")
    else:
        if not _SAFE_NAME.match(value):
            out.append(f"{b.where}: `file:` needs a plain file name (no directory), got {value!r}")
        if b.lang == RUNS:
            out.append(f"{b.where}: `file:` names a ```bash block: commands are run, not written")
    return out


def read(path: Path) -> Page:
    return parse(path.read_text(), str(path.relative_to(ROOT)))


def doc_paths(root: Path = ROOT) -> list[Path]:
    """README.md and the hand-written pages of docs/ (docs/reference/ is generated, and not a page of commands)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Script:
    """What one page's commands need: its files and its runnable blocks, in page order. Pages that show the same
    commands with the same files (README.md's tour and docs/tour.md) share one script."""

    pages: tuple[str, ...]
    files: tuple[tuple[str, str], ...]  # (name, text)
    commands: tuple[Block, ...]

    @property
    def key(self) -> tuple:
        return self.files, tuple(b.body for b in self.commands)

    @property
    def name(self) -> str:
        return "+".join(self.pages)


def scripts(pages: Iterable[Page]) -> list[Script]:
    """One script per distinct set of commands and files, in the pages' order; pages without commands have none."""
    out: dict[tuple, Script] = {}
    for page in pages:
        commands = tuple(b for b in page.blocks if b.runs)
        if not commands:
            continue
        s = Script((page.path,), tuple((b.file_name, b.body) for b in page.blocks if b.file_name), commands)
        seen = out.get(s.key)
        out[s.key] = s if seen is None else Script(seen.pages + s.pages, seen.files, seen.commands)
    return list(out.values())


#: what ends a command's arguments on a shell line: redirections, background, lists, pipes
_SHELL_ENDS = frozenset({">", ">>", "2>", "2>&1", "&", "&&", "||", "|", ";"})
_SHELL_WORDS = frozenset({"until", "while", "if", "then", "do", "time", "!"})


def transcoder_commands(block: Block) -> list[list[str]]:
    """The arguments of each `transcoder ...` command in a shell block, as the shell would pass them (continued lines
    joined, comments, environment assignments, redirections and what follows `&`, `&&`, `|`, `;` left out)."""
    out = []
    for line in block.body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words and (words[0] in _SHELL_WORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
            words = words[1:]
        if not words or words[0] != "transcoder":
            continue
        args = []
        for w in words[1:]:
            if w in _SHELL_ENDS or w.startswith((">", "2>")):
                break
            args.append(w)
        out.append(args)
    return out


def substitute(text: str, bootstrap: str, metrics_port: int) -> str:
    """The docs' local broker and metrics port replaced by the test's."""
    text = text.replace(LOCAL_BOOTSTRAP, bootstrap)
    return re.sub(rf"(?<!\d){METRICS_PORT}(?!\d)", str(metrics_port), text)


def bash(script: Script, bootstrap: str, metrics_port: int) -> str:
    """The script's commands as one bash program: stops at the first failing command, prints `### page:line` on
    stderr before each block (so a failure names its block), and stops the background jobs it started on exit."""
    out = ["set -euo pipefail",
           # a job left running (a failure before the page stops it) is stopped, and waited for, on the way out
           "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT"]
    for b in script.commands:
        out.append(f"printf '\\n### %s\\n' '{b.where}' >&2")
        out.append(substitute(b.body, bootstrap, metrics_port).rstrip("\n"))
    return "\n".join(out) + "\n"
