"""Pure: Kafka's compression codecs by name: attribute ids, the levels transcoder accepts, and which codec a broker
keeps.

The framing of the batches transcoder builds itself is in codecs.framing.
"""

from __future__ import annotations

from typing import Literal

Codec = Literal["none", "gzip", "snappy", "lz4", "zstd"]
CODECS: tuple[Codec, ...] = ("none", "gzip", "snappy", "lz4", "zstd")

#: The low three bits of a v2 record batch's attributes (Kafka's CompressionType ids).
ATTRIBUTE_ID: dict[Codec, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: Levels transcoder accepts for each codec. None: the codec has no levels.
LEVELS: dict[Codec, tuple[int, int] | None] = {
    "none": None,
    "gzip": (0, 9),
    "snappy": None,
    "lz4": (0, 12),
    "zstd": (1, 22),
}

#: librdkafka caps `compression.level` at 12 for every codec: zstd 13..22 batches are built by
#: transcoder itself (codecs.framing's encode_batches, sent by kafka.producer's BatchProducer).
LIBRDKAFKA_MAX_LEVEL = 12


def built_here(codec: Codec, level: int | None) -> bool:
    """True when batches of this codec and level are built by transcoder, not librdkafka."""
    return codec == "zstd" and level is not None and level > LIBRDKAFKA_MAX_LEVEL

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


CODEC_OF_ID: dict[int, Codec] = {v: k for k, v in ATTRIBUTE_ID.items()}


def stored_recompressed(stored_id: int, produced: Codec, topic_compression_type: str) -> bool:
    """True when a stored batch's codec shows the broker recompressed what was produced.

    A batch stored uncompressed on a `producer` topic is librdkafka's choice (it sends a batch
    uncompressed when compressing would not shrink it), not the broker's.
    """
    stored = CODEC_OF_ID.get(stored_id)
    if stored == produced:
        return False
    return not (stored == "none" and topic_compression_type.strip().lower() == "producer")
