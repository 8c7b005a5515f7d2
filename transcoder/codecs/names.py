"""Pure: Kafka's compression codecs by name: attribute ids, the levels transcoder accepts, and which codec a broker
keeps, all read from native/'s codec table (transcoder_native.codec_table(), where a codec's facts are written once).

The framing of the batches transcoder builds itself is in codecs.framing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, get_args

import transcoder_native

#: The codecs for the type checker: the same names as the table's rows (a unit test holds them equal).
Codec = Literal["none", "gzip", "snappy", "lz4", "zstd"]


def is_codec(name: str) -> TypeGuard[Codec]:
    """True when `name` is one of Kafka's codecs (as `compression.type` spells it, lower case)."""
    return name in get_args(Codec)


@dataclass(frozen=True)
class CodecRow:
    """One codec's row of native/'s codec table."""

    name: Codec
    #: Kafka's CompressionType id: the low three bits of a v2 record batch's attributes.
    attribute: int
    #: The levels transcoder accepts (a destination's or a candidate's `level`, evaluate's `--codecs`); None: the
    #: codec has no levels.
    levels: tuple[int, int] | None
    #: The level used when none is given; None: the codec has no levels.
    default_level: int | None
    #: The lowest fast (negative) level, for a codec that has them (zstd): Java producers take fast_min..-1,
    #: librdkafka does not. None: no fast levels.
    fast_min: int | None
    #: The levels `transcoder evaluate` measures when no --codecs is given (None: the default level).
    evaluated: tuple[int | None, ...]


def _row(row: Mapping[str, Any]) -> CodecRow:
    name = row["name"]
    if not is_codec(name):
        raise ImportError(f"native/'s codec table has {name!r}, which transcoder.codecs.names.Codec does not list")
    levels = row["levels"]
    return CodecRow(name=name, attribute=int(row["attribute"]),
                    levels=None if levels is None else (int(levels[0]), int(levels[1])),
                    default_level=row["default_level"], fast_min=row["fast_min"], evaluated=tuple(row["evaluated"]))


#: Every codec's row, in Kafka's id order.
TABLE: dict[Codec, CodecRow] = {row.name: row for row in map(_row, transcoder_native.codec_table())}
CODECS: tuple[Codec, ...] = tuple(TABLE)

#: The low three bits of a v2 record batch's attributes (Kafka's CompressionType ids).
ATTRIBUTE_ID: dict[Codec, int] = {c: r.attribute for c, r in TABLE.items()}
CODEC_OF_ID: dict[int, Codec] = {r.attribute: c for c, r in TABLE.items()}

#: Levels transcoder accepts for each codec. None: the codec has no levels.
LEVELS: dict[Codec, tuple[int, int] | None] = {c: r.levels for c, r in TABLE.items()}

#: librdkafka caps `compression.level` at 12 for every codec: zstd 13..22 batches are built by
#: transcoder itself (codecs.framing's encode_batches, sent by kafka.producer's BatchProducer).
LIBRDKAFKA_MAX_LEVEL: int = transcoder_native.LIBRDKAFKA_MAX_LEVEL


#: The levels of each codec above librdkafka's cap (zstd 13..22): batches transcoder builds itself.
BUILT_HERE: dict[Codec, tuple[int, int]] = {
    c: (LIBRDKAFKA_MAX_LEVEL + 1, b[1]) for c, b in LEVELS.items() if b is not None and b[1] > LIBRDKAFKA_MAX_LEVEL}


def built_here(codec: Codec, level: int | None) -> bool:
    """True when batches of this codec and level are built by transcoder, not librdkafka."""
    bounds = BUILT_HERE.get(codec)
    return bounds is not None and level is not None and level >= bounds[0]


#: Produce request version that first allowed zstd (Kafka 2.1, KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7


def check_level(codec: Codec, level: int | None) -> None:
    """Raise ValueError if `level` is not one transcoder can produce for `codec`."""
    if level is None:
        return
    bounds = LEVELS[codec]
    if bounds is None:
        raise ValueError(f"codec {codec} has no compression levels; remove `level`")
    lo, hi = bounds
    if not lo <= level <= hi:
        raise ValueError(f"level {level} is outside {lo}..{hi}, the range of {codec} levels")


def broker_recompresses(topic_compression_type: str, produced: Codec) -> bool:
    """True when a topic's compression.type makes the broker recompress batches produced with `produced`.

    The broker keeps a batch as produced only when the topic says `producer`, or names the same
    codec (for `uncompressed`, no codec).
    """
    t = topic_compression_type.strip().lower()
    if t == "producer":
        return False
    if t == "uncompressed":
        return produced != "none"
    return t != produced


def stored_recompressed(stored_id: int, produced: Codec, topic_compression_type: str) -> bool:
    """True when a stored batch's codec shows the broker recompressed what was produced.

    A batch stored uncompressed on a `producer` topic is librdkafka's choice (it sends a batch
    uncompressed when compressing would not shrink it), not the broker's.
    """
    stored = CODEC_OF_ID.get(stored_id)
    if stored == produced:
        return False
    return not (stored == "none" and topic_compression_type.strip().lower() == "producer")
