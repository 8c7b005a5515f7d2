"""How --help lays out a group's commands: in named sections (the top level: production, then development), or in
the order a workflow runs them (`migrate`), rather than click's alphabetical list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

#: The top-level help's sections, each command once: what runs against production clusters, then what a developer
#: runs on a laptop. A command in none is listed under a last section, "Other commands".
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Commands", ("run", "validate", "report", "migrate", "evaluate", "spark")),
    ("Development commands", ("demo", "seed", "local-kafka")),
)


class InOrder(click.Group):
    """A group whose commands are listed (in --help and to completion) in `order`, the order they are run in;
    commands not named there come after, alphabetically."""

    def __init__(self, *args: Any, order: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order = tuple(order)

    def list_commands(self, ctx: click.Context) -> list[str]:
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(self.commands, key=lambda name: (rank.get(name, len(rank)), name))


class Sectioned(click.Group):
    """A group whose --help lists its commands in `sections` (SECTIONS), each in its own order."""

    sections: tuple[tuple[str, tuple[str, ...]], ...] = SECTIONS

    def list_commands(self, ctx: click.Context) -> list[str]:
        listed = [name for _, names in self.sections for name in names if name in self.commands]
        return listed + sorted(set(self.commands) - set(listed))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        shown = {name: cmd for name, cmd in self.commands.items() if not cmd.hidden}
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name in shown)
        placed = {name for _, names in self.sections for name in names}
        sections = [*self.sections, ("Other commands", tuple(sorted(set(shown) - placed)))]
        for title, names in sections:
            rows = [(name, shown[name].get_short_help_str(limit)) for name in names if name in shown]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
