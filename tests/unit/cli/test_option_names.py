"""One name per meaning across every command (issue 44): the test walks the command tree (main.commands,
recursively) and fails when one long option name has two meanings (another type, choice set, or multiple-ness on
another command), when one short flag stands for two long names, when an option has no help text, or when an old
spelling kept as an alias is not a hidden alias of an option of its own command."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import click

from transcoder.cli import main
from transcoder.cli.options import Renamed

#: Long names whose choice sets may differ between commands, and why. Anything else must mean the same everywhere.
DIFFERENT_CHOICES = {
    "--format": "the output format: each command offers the renderings it has, all of OUTPUT_FORMATS",
}
OUTPUT_FORMATS = {"table", "markdown", "json", "csv"}


def commands(command: click.Command = main, path: str = "transcoder") -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from commands(sub, f"{path} {name}")


def options(include_renamed: bool = False) -> Iterator[tuple[str, click.Option]]:
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option) and (include_renamed or not isinstance(param, Renamed)):
                yield path, param


def long_name(option: click.Option) -> str:
    return next((o for o in option.opts if o.startswith("--")), option.opts[0])


def meaning(option: click.Option, *, choices: bool = True) -> tuple[object, ...]:
    """What a name stands for, as far as the command line can tell: its value's type (a choice: its values), whether
    it is a flag, whether it repeats."""
    kind: object = option.type.name
    if isinstance(option.type, click.Choice):
        kind = ("choice", frozenset(option.type.choices) if choices else None)
    return kind, option.is_flag, option.multiple


def test_one_long_name_has_one_meaning_on_every_command():
    seen: dict[str, dict[tuple[object, ...], list[str]]] = defaultdict(lambda: defaultdict(list))
    for path, option in options():
        for name in (o for o in [*option.opts, *option.secondary_opts] if o.startswith("--")):
            seen[name][meaning(option, choices=name not in DIFFERENT_CHOICES)].append(path)
    twice = {name: {str(m): paths for m, paths in by.items()} for name, by in seen.items() if len(by) > 1}
    assert not twice, f"one name, two meanings: {twice}"


def test_allowed_choice_differences_stay_within_their_meaning():
    formats = {path: set(o.type.choices) for path, o in options()
               if long_name(o) == "--format" and isinstance(o.type, click.Choice)}
    assert formats and all(c <= OUTPUT_FORMATS and "json" in c for c in formats.values()), formats
    assert set(DIFFERENT_CHOICES) <= {long_name(o) for _, o in options()}, "an allowance for a name no option has"


def test_one_short_flag_stands_for_one_long_name():
    longs: dict[str, set[str]] = defaultdict(set)
    for _, option in options():
        for short in (o for o in option.opts if not o.startswith("--")):
            longs[short].add(long_name(option))
    twice = {short: sorted(names) for short, names in longs.items() if len(names) > 1}
    assert not twice, f"one short flag, two long names: {twice}"


def test_every_option_has_help_text():
    missing = [f"{path} {long_name(o)}" for path, o in options(include_renamed=True) if not (o.help or "").strip()]
    assert not missing, f"options without help text: {missing}"


def test_an_old_spelling_is_a_hidden_alias_of_an_option_of_its_own_command():
    for path, command in commands():
        current = {o for p in command.params if not isinstance(p, Renamed) for o in [*p.opts, *p.secondary_opts]}
        targets = {p.name for p in command.params if not isinstance(p, Renamed)}
        for alias in (p for p in command.params if isinstance(p, Renamed)):
            assert alias.hidden and not alias.expose_value, (path, alias.opts)
            assert alias.to.name in targets, (path, alias.opts, alias.to.name)
            assert not set(alias.opts) & current, f"{path}: {alias.opts} is both an old and a current spelling"


def test_the_renames_of_issue_44_are_in_place():
    aliases = {(path, alias.opts[0]): long_name(alias.to) for path, alias in options(include_renamed=True)
               if isinstance(alias, Renamed)}
    assert aliases == {
        ("transcoder seed", "-f"): "--file", ("transcoder seed", "--format"): "--input-format",
        ("transcoder seed", "-n"): "--count", ("transcoder seed", "-p"): "--partitions",
        ("transcoder evaluate", "--partitions"): "--partition", ("transcoder evaluate", "-f"): "--file",
        ("transcoder evaluate", "--file-format"): "--input-format", ("transcoder evaluate", "-n"): "--count",
        ("transcoder local-kafka", "--version"): "--kafka-version",
        ("transcoder migrate watch", "--partitions"): "--partition",
        ("transcoder migrate watch", "--count"): "--samples",
    }


def test_kind_is_a_choice_wherever_it_is():
    kinds = [o for _, o in options() if long_name(o) == "--kind"]
    assert len(kinds) == 3 and all(isinstance(o.type, click.Choice) for o in kinds)
