"""transcoder.kafka.fetcher.Fetcher's wait (its RawClient a fake noting each Fetch sent): with `until`, each Fetch a
round sends, the one it reads ahead too, asks the broker to wait what is left until then when it is sent (never over
max_wait_ms, never under 0); without it, max_wait_ms."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from transcoder.kafka.fetcher import Fetcher


class Broker:
    """What the fetcher asks of its RawClient: leaders, and Fetches that find no record (each wait noted)."""

    def __init__(self) -> None:
        self.waits: list[int] = []

    def leaders(self, topics: set[str]) -> dict[tuple[str, int], int]:
        return {("t", 0): 1}

    def fetch_start(self, by_leader: Any, *, max_bytes: int, partition_max_bytes: int, max_wait_ms: int,
                    min_bytes: int) -> Any:
        self.waits.append(max_wait_ms)
        return by_leader

    def fetch_answers(self, pending: Any) -> dict[tuple[str, int], Any]:
        return {tp: SimpleNamespace(records=b"", error_code=0, aborted_transactions=(), last_stable_offset=5,
                                    high_watermark=5)
                for offsets in pending.values() for tp in offsets}


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
