"""The error catalogue (docs/reference/errors.md), generated from the source: every one-line error transcoder raises.

`python -m transcoder.dev.error_catalogue > docs/reference/errors.md` writes it. The package's source is read, not
imported: each `E("...")` (raised, or returned to be raised) whose E is `TranscoderError` or one of its
subclasses, with a message written in the code (a string, an f-string, or strings joined with `+`), becomes one
entry: the message as a reader sees it (each `{expression}` shown as `{name}`, the name it holds), the class, the
exit status the CLI gives it, and the module. A message built elsewhere (a variable, a function's result) cannot
be read this way: those are counted, not listed.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: the package this module is part of (the catalogue is generated from a checkout or an installed package alike)
PACKAGE = Path(__file__).resolve().parents[1]
ROOT_CLASS = "TranscoderError"
#: the config's validators raise ValueError, which loading reports as a ConfigError (`FILE: key: message`)
VALIDATORS = ("config", "ValueError", "ConfigError")  # (the package's subpackage, raised, reported as)
REGENERATE = "python -m transcoder.dev.error_catalogue > docs/reference/errors.md"


@dataclass(frozen=True)
class ErrorClass:
    name: str
    bases: tuple[str, ...]
    exit_code: int | str | None  # a literal, ExitCode.NAME, or None: inherited
    doc: str


@dataclass(frozen=True)
class Entry:
    """One TranscoderError made with its message written in the code."""

    message: str  # with {name} where the code formats a value in
    error: str  # the class raised
    module: str  # transcoder/cli/migrate.py


def _modules(package: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(package.rglob("*.py")):
        yield path.relative_to(package.parent).as_posix(), ast.parse(path.read_text(), str(path))


def _exit_code(cls: ast.ClassDef) -> int | str | None:
    for stmt in cls.body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id == "exit_code") or value is None:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, int):
            return value.value
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "ExitCode":
            return value.attr
    return None


def error_classes(modules: Iterable[tuple[str, ast.Module]]) -> dict[str, ErrorClass]:
    """TranscoderError and every class that derives from it, by name."""
    classes: dict[str, ErrorClass] = {}
    for _, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = tuple(b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                              for b in node.bases)
                classes[node.name] = ErrorClass(node.name, bases, _exit_code(node), ast.get_docstring(node) or "")
    out: dict[str, ErrorClass] = {}
    changed = True
    while changed:
        changed = False
        for name, cls in classes.items():
            if name not in out and (name == ROOT_CLASS or any(b in out for b in cls.bases)):
                out[name] = cls
                changed = True
    return out


def exit_codes(classes: dict[str, ErrorClass], named: dict[str, int]) -> dict[str, int]:
    """Each class's exit status, inherited along its first error base; `named`: ExitCode's members."""

    def code(name: str) -> int:
        cls = classes[name]
        if isinstance(cls.exit_code, int):
            return cls.exit_code
        if isinstance(cls.exit_code, str):
            return named[cls.exit_code]
        base = next((b for b in cls.bases if b in classes), None)
        return 1 if base is None else code(base)

    return {name: code(name) for name in classes}


#: functions whose result is named after their argument: `len(parts)` is shown as {parts}
_BUILTINS = frozenset({"len", "str", "repr", "int", "float", "sorted", "list", "tuple", "set", "min", "max", "sum",
                       "abs", "round", "getattr"})


def _placeholder(expr: ast.expr) -> str:
    """What a formatted value is called on the page: the last name of `x.y.z` (`x.strip()`: x; `len(x)`: x;
    `why(x)`: why), else `…`."""
    while isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        elif isinstance(expr.func, ast.Name) and expr.func.id in _BUILTINS and expr.args:
            expr = expr.args[0]
        elif isinstance(expr.func, ast.Name):
            return expr.func.id.lstrip("_")
        else:
            return "…"
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Subscript):
        return _placeholder(expr.value)
    return "…"


def message_text(node: ast.expr) -> str | None:
    """The message a `raise E(<node>)` writes, with {name} for each value formatted in; None: not written here."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append("{" + _placeholder(v.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = message_text(node.left), message_text(node.right)
        return None if left is None and right is None else (left or "{…}") + (right or "{…}")
    return None


def func_name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


@functools.cache
def catalogue(package: Path = PACKAGE) -> tuple[list[Entry], dict[str, ErrorClass], int]:
    """The entries (sorted, one per distinct message and class), the error classes, and how many errors made have
    a message the source does not spell out."""
    modules = list(_modules(package))
    classes = error_classes(modules)
    entries: dict[tuple[str, str], Entry] = {}
    unwritten = 0
    for module, tree in modules:
        raised = {id(n.exc) for n in ast.walk(tree) if isinstance(n, ast.Raise) and n.exc is not None}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func_name(func)
            if module.startswith(f"{package.name}/{VALIDATORS[0]}/") and name == VALIDATORS[1]:
                name = VALIDATORS[2]
            if name not in classes:
                continue
            if name == VALIDATORS[2] and func_name(func) == VALIDATORS[1] and id(node) not in raised:
                continue  # a ValueError made, not raised, is no validator's message
            text = message_text(node.args[0]) if node.args else None
            if text is None:
                unwritten += 1
                continue
            text = " ".join(text.split())
            entries.setdefault((text, name), Entry(text, name, module))
    return sorted(entries.values(), key=lambda e: (e.module, e.message.lower())), classes, unwritten


def _cell(text: str) -> str:
    """Text for a Markdown table cell, in a code span that cannot be closed early (longest backtick run + 1)."""
    text = text.replace("|", "\\|")
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render(entries: list[Entry], classes: dict[str, ErrorClass], codes: dict[str, int], unwritten: int) -> str:
    lines = [
        "# Error catalogue",
        "",
        f"<!-- Generated by `{REGENERATE}`: do not edit by hand. -->",
        "",
        "Every one-line error transcoder raises with its text written in the code, generated from the source "
        "(`transcoder/dev/error_catalogue.py`); the config's own checks are among them, under `transcoder/config/`, "
        "shown after the file and key they concern. A command prints it on stderr as `transcoder: error: MESSAGE` and "
        "exits with the status below. `{name}` stands for a value the message names (a topic, a group, an offset). "
        "For what to do about the ones met most, see [Troubleshooting](../troubleshooting.md).",
        "",
        f"{len(entries)} messages; {unwritten} more errors build their message elsewhere (from Kafka's error, or a "
        "helper's result) and are not listed. `tests/unit/docs/test_error_catalogue.py` fails while this page "
        "differs from what the generator writes.",
        "",
        "## The error classes",
        "",
        "| class | exit status | meaning |",
        "|---|---|---|",
    ]
    for name in sorted(classes, key=lambda n: (codes[n], n)):
        lines.append(f"| `{name}` | {codes[name]} | {' '.join(classes[name].doc.split()) or '—'} |")
    lines.append("")
    module = None
    for e in entries:
        if e.module != module:
            module = e.module
            lines += ["", f"## `{module}`", "", "| message | class | exit |", "|---|---|---|"]
        lines.append(f"| {_cell(e.message)} | `{e.error}` | {codes[e.error]} |")
    return "\n".join(lines).rstrip("\n") + "\n"


def page(package: Path = PACKAGE) -> str:
    from transcoder.errors import ExitCode

    entries, classes, unwritten = catalogue(package)
    return render(entries, classes, exit_codes(classes, {m.name: int(m) for m in ExitCode}), unwritten)


def main() -> None:
    print(page(), end="")


if __name__ == "__main__":
    main()
