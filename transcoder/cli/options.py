"""The command line's shared spellings: value types every command reads alike (partition numbers, times, choices
refused in one line) and old spellings of renamed options and values, kept as hidden aliases that still work and
warn.

An old spelling is declared beside the option it became: `option("--input-format", "fmt", was=("--format",), ...)`
adds the option and, hidden from --help, `--format`, whose value goes to the option now named (a one-line warning on
stderr names the new spelling); `Choice(..., was={"local": "service"})` does the same for a renamed value.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

import click

from transcoder.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def _warn(old: str, new: str, ctx: click.Context | None) -> None:
    where = f"`{ctx.command_path}` " if ctx is not None else ""
    click.echo(f"transcoder: warning: {where}{old} is deprecated and will be removed: use {new}", err=True)


class Renamed(click.Option):
    """An old spelling of an option (`to`): hidden from --help; given, it warns once and hands its value to `to`, as
    if `to` itself had been given. Giving both is a usage error."""

    def __init__(self, param_decls: Sequence[str], *, to: click.Option, **attrs: Any) -> None:
        if to.secondary_opts:
            raise ValueError(f"{to.opts[0]}: a --x/--no-x flag is renamed with both spellings, not as an alias")
        flag = {"is_flag": True, "flag_value": to.flag_value} if to.is_flag else {}
        super().__init__(param_decls, type=None if to.is_flag else to.type, multiple=to.multiple, hidden=True,
                         expose_value=False, help=f"The old spelling of {to.opts[0]}.", **flag, **attrs)
        self.to = to

    def handle_parse_result(self, ctx: click.Context, opts: Mapping[str, Any],
                            args: list[str]) -> tuple[Any, list[str]]:
        # the parser's values by parameter name (a dict): the alias's value moves to the name of the option it
        # became, which is processed after it (click processes what was given first, in the order given)
        given = cast(MutableMapping[str, Any], opts)
        if self.name in given:
            assert self.name is not None and self.to.name is not None
            if self.to.name in given:
                raise ConfigError(f"give {self.to.opts[0]} once: {self.opts[0]} is its old spelling")
            _warn(self.opts[0], self.to.opts[0], ctx)
            given[self.to.name] = given.pop(self.name)
        return super().handle_parse_result(ctx, given, args)


def option(*param_decls: str, was: Sequence[str] = (), **attrs: Any) -> Callable[[F], F]:
    """click.option, with the option's old spellings (`was`) as hidden aliases that warn (Renamed)."""
    new = click.Option(param_decls, **attrs)
    decorators = [click.option(*param_decls, **attrs)]
    decorators += [click.option(old, f"renamed_{new.name}_{i}", cls=Renamed, to=new) for i, old in enumerate(was)]

    def decorate(f: F) -> F:
        for add in reversed(decorators):
            f = add(f)
        return f

    return decorate


class Choice(click.Choice):
    """click.Choice, with renamed values (`was`: old -> new) still accepted: hidden from --help, they warn and give
    the new value."""

    def __init__(self, choices: Sequence[str], *, was: Mapping[str, str] | None = None, **attrs: Any) -> None:
        super().__init__(choices, **attrs)
        self.was = dict(was or {})
        unknown = set(self.was.values()) - set(choices)
        if unknown:
            raise ValueError(f"renamed values must become one of the choices, not {sorted(unknown)}")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value in self.was:
            name = param.opts[0] if param is not None and param.opts else "the value"
            _warn(f"{name} {value}", f"{name} {self.was[value]}", ctx)
            value = self.was[value]
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:  # one line, as every other refusal, not click's usage block
            raise ConfigError(f"unknown {_name(param, 'value')} {value!r}; choose one of "
                              f"{', '.join(map(str, self.choices))}") from None


def _name(param: click.Parameter | None, fallback: str) -> str:
    return param.opts[0] if param is not None and param.opts else fallback


class Partitions(click.ParamType):
    """Partition numbers: one (`--partition 3`, repeatable, as kafka-console-consumer's) or a comma list (`0,3`).
    With `multiple=True` and `callback=partition_list` the command receives a sorted list, or None for all."""

    name = "partition"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[int]:
        if isinstance(value, list):
            return value
        text = str(value)
        try:
            out = [int(p) for p in text.split(",") if p.strip()]
        except ValueError:
            out = []
        if not out or any(p < 0 for p in out):
            raise ConfigError(f"{_name(param, '--partition')} {text!r}: give partition numbers, e.g. 0 or 0,3")
        return out


def partition_list(ctx: click.Context, param: click.Parameter, value: Sequence[list[int]]) -> list[int] | None:
    """The callback of a `multiple` Partitions option: every number given, sorted, once; None when none was."""
    return sorted({p for part in value for p in part}) or None


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def duration_ms(value: str) -> int | None:
    """A duration such as 90s, 30m, 1h, 1h30m, 2d as milliseconds; None when `value` is not one."""
    text = value.strip().lower()
    if not text or _DURATION.sub("", text):
        return None
    return round(sum(float(n) * _UNIT_MS[u] for n, u in _DURATION.findall(text)))


@dataclass(frozen=True)
class When:
    """A time as given on the command line: a fixed instant (`at_ms`) or a duration back from now (`back_ms`),
    which moves with the clock (`migrate watch --follow` slides its window)."""

    text: str
    at_ms: int | None = None
    back_ms: int | None = None

    def ms(self, now_ms: int | None = None) -> int:
        """Epoch milliseconds, a duration counted back from `now_ms` (default: now)."""
        if self.at_ms is not None:
            return self.at_ms
        assert self.back_ms is not None
        return (int(time.time() * 1000) if now_ms is None else now_ms) - self.back_ms

    def __str__(self) -> str:
        return self.text


def parse_when(value: str, option: str, now_ms: int, *, past: bool = False) -> When:
    """A time of the command line: an ISO-8601 time with a zone, epoch milliseconds, or a duration back from now
    (30m, 1h, 2d). ConfigError (one line, naming `option`) when it is none of them, or, with `past`, in the future."""
    text = value.strip()
    duration = duration_ms(text)
    if duration is not None:
        if duration <= 0:
            raise ConfigError(f"{option} {value!r}: a duration must be positive")
        return When(text, back_ms=duration)
    if text.isdigit():
        ms = int(text)
    else:
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise ConfigError(f"{option} {value!r} is neither an ISO-8601 time (2026-11-01T00:00:00Z), epoch "
                              "milliseconds nor a duration back from now (1h, 30m, 2d)") from None
        if dt.tzinfo is None:
            raise ConfigError(f"{option} {value!r} needs a time zone, e.g. {text}Z or {text}+01:00")
        ms = int(dt.timestamp() * 1000)
    if past and ms > now_ms:
        raise ConfigError(f"{option} {value!r} is in the future")
    return When(text, at_ms=ms)


class Time(click.ParamType):
    """--since and --until everywhere: ISO-8601 with a zone, epoch milliseconds, or a duration back from now
    (parse_when); `past`: a time in the future is refused."""

    name = "time"

    def __init__(self, *, past: bool = False) -> None:
        self.past = past

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> When:
        if isinstance(value, When):
            return value
        return parse_when(str(value), _name(param, "--since"), int(time.time() * 1000), past=self.past)


#: what a Time option's help says of the forms it takes
TIME_FORMS = "ISO-8601 with a zone, epoch ms, or a duration back from now: 30m, 1h, 2d"
