"""The CLI reference (docs/reference/cli.md): Markdown generated from the commands themselves, every command's usage,
help and options (type, default, allowed values, environment variable), in the order --help lists them. Hidden
options (old spellings kept as aliases, test hooks) are left out, as --help leaves them out.

Regenerate the page with `python -m transcoder.cli.reference > docs/reference/cli.md`.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator

import click

from transcoder.cli import main as cli
from transcoder.cli.options import Choice, Renamed

PAGE = "docs/reference/cli.md"
REGENERATE = f"python -m transcoder.cli.reference > {PAGE}"


def walk(command: click.Command = cli, parent: click.Context | None = None,
         name: str = "transcoder") -> Iterator[click.Context]:
    """A context for `command` and each of its subcommands, depth first, in the order their group's --help lists
    them; hidden commands left out."""
    ctx = click.Context(command, info_name=name, parent=parent)
    yield ctx
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, ctx, sub_name)


def anchor(ctx: click.Context) -> str:
    """The page's anchor of a command's section (mkdocs' slug of its heading)."""
    return ctx.command_path.replace(" ", "-")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(param: click.Option) -> str:
    if param.is_flag and not param.secondary_opts:
        return "flag"
    if param.is_flag:
        return "flag pair"
    if isinstance(param.type, click.Choice):
        return " \\| ".join(f"`{c}`" for c in param.type.choices)
    if isinstance(param.type, click.IntRange | click.FloatRange):
        return _range(param.type)
    return _cell(param.metavar or param.type.name)


def _range(kind: click.IntRange | click.FloatRange) -> str:
    base = "integer" if isinstance(kind, click.IntRange) else "number"
    low = None if kind.min is None else f"{'above' if kind.min_open else 'from'} {kind.min}"
    high = None if kind.max is None else f"{'below' if kind.max_open else 'to'} {kind.max}"
    return f"{base} {' '.join(b for b in (low, high) if b)}"


def _default(param: click.Option) -> str:
    if param.is_flag and not param.secondary_opts:
        return ""
    value = param.to_info_dict()["default"]  # None when there is none (click's own sentinel is not public)
    if value is None or value == () or callable(value):
        return ""
    if param.is_flag:
        return f"`{(param.opts if value else param.secondary_opts)[0]}`"
    return f"`{value}`"


def _option_row(param: click.Option) -> str:
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    kind = _type(param) + (" (repeatable)" if param.multiple else "")
    help_text = _cell(param.help or "")
    if param.required:
        help_text = "Required. " + help_text
    envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    env = ", ".join(f"`{e}`" for e in envvars)
    return f"| {names} | {kind} | {_default(param)} | {env} | {help_text} |"


def _help(command: click.Command) -> str:
    """The command's help as --help prints it: dedented, cut at click's \\f, without its \\b markers."""
    text = inspect.cleandoc(command.help or "").split("\f")[0]
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _section(ctx: click.Context) -> list[str]:
    command = ctx.command
    level = "###" if ctx.command_path.count(" ") > 1 else "##"
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [f"{level} `{ctx.command_path}`", "", "```text", usage, "```", ""]
    lines += [_help(command), ""]
    shown = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    if shown:
        lines += ["| Option | Type | Default | Environment | Description |", "| --- | --- | --- | --- | --- |"]
        lines += [_option_row(p) for p in shown]
        lines.append("")
    if isinstance(command, click.Group):
        subs = [(n, command.get_command(ctx, n)) for n in command.list_commands(ctx)]
        lines += ["| Command | What it does |", "| --- | --- |"]
        lines += [f"| [`{n}`](#{anchor(ctx)}-{n}) | {_cell(sub.get_short_help_str(200))} |"
                  for n, sub in subs if sub is not None and not sub.hidden]
        lines.append("")
    return lines


def _renamed() -> list[str]:
    """The old spellings still accepted, each with what it is now: hidden from the sections above and from --help;
    given, they work and print a one-line warning naming the new spelling."""
    rows = []
    for ctx in walk():
        for param in ctx.command.params:
            if isinstance(param, Renamed):
                rows.append((ctx.command_path, f"`{param.opts[0]}`", f"`{param.to.opts[0]}`"))
            elif isinstance(param, click.Option) and isinstance(param.type, Choice):
                rows += [(ctx.command_path, f"`{param.opts[0]} {old}`", f"`{param.opts[0]} {new}`")
                         for old, new in param.type.was.items()]
    if not rows:
        return []
    lines = ["## Renamed options", "",
             "One name means one thing on every command (`tests/unit/cli/test_option_names.py` checks it). These "
             "old spellings still work, and print a one-line warning on stderr that names the new one; they will be "
             "removed in a later release.", "",
             "| Command | Old spelling | Use instead |", "| --- | --- | --- |"]
    return lines + [f"| `{path}` | {old} | {new} |" for path, old, new in rows] + [""]


def page() -> str:
    """The whole page."""
    lines = [
        "# CLI reference",
        "",
        f"<!-- Generated by transcoder.cli.reference from the commands; regenerate: {REGENERATE} -->",
        "",
        "This page is generated from the commands themselves (`transcoder/cli/`): each one's usage, help and options "
        "as `--help` shows them. To change a text, edit the command's docstring or the option's `help`, then "
        "regenerate the page from the repository's root:",
        "",
        "<!-- not run: rewrites this page in a checkout -->",
        "```bash",
        REGENERATE,
        "```",
        "",
        "`tests/unit/cli/test_reference.py` fails while this page differs from what the generator writes.",
        "",
        "Every command also takes `-h`/`--help`.",
        "",
    ]
    for ctx in walk():
        lines += _section(ctx)
    lines += _renamed()
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    sys.stdout.write(page())


if __name__ == "__main__":
    main()
