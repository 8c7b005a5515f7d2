"""transcoder.kafka.fetcher.Fetcher's wait (its RawClient a fake noting each Fetch sent): with `until`, each Fetch a
round sends, the one it reads ahead too, asks the broker to wait what is left until then when it is sent (never over
max_wait_ms, never under 0); without it, max_wait_ms. And its sizes: the cluster config's Kafka fetch properties."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from transcoder.errors import TranscoderError
from transcoder.kafka.fetcher import Fetcher


class Broker:
    """What the fetcher asks of its RawClient: leaders, and Fetches that find no record (each wait noted)."""

    def __init__(self) -> None:
        self.waits: list[int] = []
        self.sizes: list[tuple[int, int, int]] = []  # each Fetch's (max_bytes, partition_max_bytes, min_bytes)

    def leaders(self, topics: set[str]) -> dict[tuple[str, int], int]:
        return {("t", 0): 1}

    def fetch_start(self, by_leader: Any, *, max_bytes: int, partition_max_bytes: int, max_wait_ms: int,
                    min_bytes: int) -> Any:
        self.waits.append(max_wait_ms)
        self.sizes.append((max_bytes, partition_max_bytes, min_bytes))
        return by_leader

    def fetch_results(self, pending: Any) -> tuple[dict[tuple[str, int], Any], dict[int, Exception]]:
        return {tp: SimpleNamespace(records=b"", error_code=0, aborted_transactions=(), last_stable_offset=5,
                                    high_watermark=5)
                for offsets in pending.values() for tp in offsets}, {}


def test_each_fetch_waits_what_is_left_until_the_caller_s_deadline_when_it_is_sent():
    f = Fetcher({"bootstrap.servers": "127.0.0.1:1"}, "t-fetch", max_wait_ms=100)
    broker = Broker()
    f._info = broker  # type: ignore[assignment]
    f.assign({("t", 0): 5})
    f.fetch()  # its own Fetch and the one read ahead: the fetcher's wait
    f.fetch(until=time.monotonic() + 0.030)  # answered by the Fetch read ahead (100); reads ahead with <= 30
    f.fetch(until=time.monotonic() - 1)  # past: reads ahead with 0
    f.fetch(until=time.monotonic() + 9)  # never over max_wait_ms
    assert broker.waits[:3] == [100, 100, broker.waits[2]] and 20 <= broker.waits[2] <= 30
    assert broker.waits[3:] == [0, 100]


def test_a_fetch_asks_for_the_sizes_the_cluster_config_sets_as_librdkafka_s_consumer_would():
    # max.partition.fetch.bytes in `cluster.config` reached the records path's librdkafka consumer but not the record
    # sets' Fetches, which always asked for 1 MiB per partition (2026-11-28)
    f = Fetcher({"bootstrap.servers": "127.0.0.1:1", "max.partition.fetch.bytes": 4_194_304,
                 "fetch.max.bytes": "16777216", "fetch.min.bytes": 1024}, "t-fetch", max_wait_ms=100)
    broker = Broker()
    f._info = broker  # type: ignore[assignment]
    f.assign({("t", 0): 5})
    f.fetch()
    assert broker.sizes[0] == (16_777_216, 4_194_304, 1024)
    default = Fetcher({"bootstrap.servers": "127.0.0.1:1"}, "t-fetch")
    assert (default.max_bytes, default.partition_max_bytes, default.min_bytes) == (52_428_800, 1_048_576, 1)


@pytest.mark.parametrize("value", ["4MB", 0, 1.5, True])
def test_a_fetch_size_that_is_not_a_whole_number_of_bytes_is_one_line(value):
    with pytest.raises(TranscoderError, match=r"^cluster config max.partition.fetch.bytes: .* is not a whole number"):
        Fetcher({"bootstrap.servers": "127.0.0.1:1", "max.partition.fetch.bytes": value}, "t-fetch")
