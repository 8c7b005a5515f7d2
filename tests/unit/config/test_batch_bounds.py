"""batch.max_bytes is bounded by what librdkafka accepts for the producer the writer builds from it."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from transcoder.config import Batch, parse
from transcoder.errors import ConfigError


def _raw(max_bytes: int) -> dict:
    return {"cluster": {"bootstrap_servers": "k1:9092"},
            "routes": [{"source": "s", "destinations": [{"codec": "lz4", "batch": {"max_bytes": max_bytes}}]}]}


def test_largest_batch_is_accepted_by_librdkafka():
    """The bound is exactly librdkafka's: the writer's producer config (batch.size, and message.max.bytes with the
    writer's margin) at the largest batch.max_bytes is accepted, one byte more is not."""
    largest = Batch.MAX_BYTES
    assert parse(_raw(largest), environ={}).routes[0].destinations[0].batch.max_bytes == largest
    Producer({"batch.size": largest, "message.max.bytes": largest + Batch.PRODUCER_MARGIN_BYTES})
    with pytest.raises(Exception, match="message.max.bytes"):
        Producer({"batch.size": largest + 1, "message.max.bytes": largest + 1 + Batch.PRODUCER_MARGIN_BYTES})


@pytest.mark.parametrize("max_bytes", [999_934_465, 2_000_000_000, 2**31])
def test_batch_larger_than_librdkafka_allows_is_refused(max_bytes):
    with pytest.raises(ConfigError) as info:
        parse(_raw(max_bytes), source="t.yaml", environ={})
    msg = str(info.value)
    assert msg.startswith("t.yaml: routes.0.destinations.0.batch.max_bytes: ")
    assert "at most 999934464" in msg and "message.max.bytes" in msg and "\n" not in msg


def test_batch_must_be_positive():
    with pytest.raises(ConfigError, match="batch.max_bytes"):
        parse(_raw(0), environ={})
