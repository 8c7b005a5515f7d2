"""Pure: the grid `transcoder evaluate` measures — codec and level settings x batch sizes — from the
command line's specs (`--codecs zstd:1,3,19 --codecs lz4 --batch-sizes 64KiB,1MiB`), validated up front.

A setting is one codec at one level (None: the codec's default level, as the clients apply it). Levels
are the ones transcoder can produce (codecs.LEVELS); a batch size may not exceed the destination's
max.message.bytes (the broker would refuse such a batch).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from transcoder.codecs import CODECS, TABLE, Codec, CodecRow, check_level, is_codec
from transcoder.errors import ConfigError

KIB, MIB = 1024, 1024 * 1024
Producer = Literal["librdkafka", "java"]
#: Batch sizes measured when none are given (never above the destination's max.message.bytes).
DEFAULT_BATCH_SIZES = (16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB)


def _default_specs(row: CodecRow) -> list[str]:
    """A codec's `--codecs` specs for the levels the codec table says evaluate measures by default."""
    levels = ",".join(str(n) for n in row.evaluated if n is not None)
    return ([row.name] if None in row.evaluated else []) + ([f"{row.name}:{levels}"] if levels else [])


#: Settings measured when no --codecs is given, from the codec table: every codec, every level of gzip and zstd,
#: lz4 at its default (fast) and at high-compression levels, snappy.
DEFAULT_CODECS = tuple(spec for row in TABLE.values() for spec in _default_specs(row))


@dataclass(frozen=True)
class Setting:
    codec: Codec
    level: int | None  # None: the codec's default level

    @property
    def label(self) -> str:
        if self.level is None:
            return self.codec
        return f"{self.codec}-fast{-self.level}" if self.level < 0 else f"{self.codec}-{self.level}"


@dataclass(frozen=True)
class Cell:
    setting: Setting
    batch_bytes: int
    #: Whose batching rule cuts the batches: librdkafka's (batch.size counts uncompressed record bytes; the
    #: service's lanes) or the Java producer's (batch.size counts estimated compressed bytes; MirrorMaker 2).
    producer: Producer = "librdkafka"


def _levels_text(levels: Sequence[int]) -> str:
    contiguous = len(levels) > 2 and list(levels) == list(range(levels[0], levels[-1] + 1))
    return f"{levels[0]}-{levels[-1]}" if contiguous else ", ".join(map(str, levels))


def default_codecs_text() -> str:
    """What `--codecs` measures when not given, in words (`none, gzip 1-9, ...`), from the codec table."""
    out: list[str] = []
    for row in TABLE.values():
        levels = [n for n in row.evaluated if n is not None]
        if not levels:
            out.append(row.name)
        elif None in row.evaluated:
            out.append(f"{row.name} (default, {_levels_text(levels)})")
        else:
            out.append(f"{row.name} {_levels_text(levels)}")
    return ", ".join(out)


def parse_codec(spec: str, option: str = "--codecs") -> list[Setting]:
    """One `--codecs` value: a codec, optionally with levels (`zstd:1,3,19`). ConfigError naming what is wrong, and
    `option`, the option the spec was given with (`--codecs`, `--current`)."""
    name, sep, levels = spec.strip().partition(":")
    name = name.strip().lower()
    if not is_codec(name):
        raise ConfigError(f"{option} {spec!r}: unknown codec {name!r} (one of {', '.join(CODECS)})")
    codec: Codec = name
    if not sep:
        return [Setting(codec, None)]
    out = []
    for part in levels.split(","):
        try:
            level = int(part.strip())
        except ValueError:
            raise ConfigError(f"{option} {spec!r}: {part.strip()!r} is not a level (an integer)") from None
        try:
            if not _fast(codec, level):
                check_level(codec, level)
        except ValueError as exc:
            raise ConfigError(f"{option} {spec!r}: {exc}") from None
        out.append(Setting(codec, level))
    if not out:
        raise ConfigError(f"{option} {spec!r}: no levels after ':'")
    return out


def _fast(codec: Codec, level: int) -> bool:
    """A fast (negative) level of a codec that has them (zstd): Kafka's Java clients accept them since 3.8 (KIP-390,
    compression.zstd.level down to zstd's minimum); librdkafka does not, so transcoder's librdkafka lanes cannot
    produce them. evaluate measures them for Java producers."""
    fast_min = TABLE[codec].fast_min
    return fast_min is not None and fast_min <= level < 0


def settings(specs: Iterable[str] = DEFAULT_CODECS) -> list[Setting]:
    """Every setting of the given specs, in their order, each once."""
    seen: dict[Setting, None] = {}
    for spec in specs:
        seen.update(dict.fromkeys(parse_codec(spec)))
    if not seen:
        raise ConfigError("--codecs: no codec to evaluate")
    return list(seen)


def batch_sizes(sizes: Sequence[int] = DEFAULT_BATCH_SIZES, *, max_message_bytes: int | None = None,
                explicit: bool = False) -> list[int]:
    """The batch sizes to measure, ascending, each once.

    Sizes above the destination's max.message.bytes: an error when the user gave them (`explicit`), left
    out of the defaults (the broker would refuse those batches).
    """
    out = sorted(set(sizes))
    if not out or out[0] <= 0:
        raise ConfigError("--batch-sizes: give one or more positive sizes, e.g. 64KiB,1MiB")
    if max_message_bytes is not None:
        over = [s for s in out if s > max_message_bytes]
        if over and explicit:
            raise ConfigError(f"--batch-sizes: {over[0]:,} B is above the topic's max.message.bytes "
                              f"({max_message_bytes:,} B): the broker would refuse such batches")
        out = [s for s in out if s <= max_message_bytes] or [max_message_bytes]
    return out


def batch_label(n: int) -> str:
    """A batch size as people write it: 64 KiB, 1 MiB, or bytes."""
    for unit, size in (("MiB", MIB), ("KiB", KIB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} B"


def grid(chosen: Sequence[Setting], sizes: Sequence[int], producers: Sequence[Producer] = ("librdkafka",)
         ) -> list[Cell]:
    """Every setting at every batch size for every producer rule (settings outer, producers inner)."""
    return [Cell(s, b, p) for s in chosen for b in sizes for p in producers]
