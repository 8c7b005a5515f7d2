"""The batch producer's batches: a record as it is held, a batch as it is sent (its records framed, or a section
sealed: encoder), the reports its records get (Delivered), a delivery report as the sender queues it (Report), one
round of the sender's Produce requests, and the cutting of a batch refused for some of its records (`isolate`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import TIMESTAMP_CREATE_TIME

from transcoder.kafka.producer.errors import ProduceError

Headers = Sequence[tuple[str, bytes | None]]
#: key, value, headers, timestamp (ms), size (key + value + header bytes)
Record = tuple[bytes | None, bytes | None, Headers, int, int]
Partition = tuple[str, int]


class Delivered:
    """A produced record as a delivery callback sees it: the accessors of confluent_kafka.Message."""

    __slots__ = ("_offset", "_partition", "_record", "_topic")

    def __init__(self, topic: str, partition: int, offset: int, record: Record) -> None:
        self._topic, self._partition, self._offset, self._record = topic, partition, offset, record

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._record[0]

    def value(self) -> bytes | None:
        return self._record[1]

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return list(self._record[2]) or None

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, self._record[3]

    def error(self) -> None:
        return None


@dataclass
class Batch:
    """One partition's batch as the sender holds it, from sealing until its report is queued."""

    tp: Partition
    records: list[Record] | None  # the records framed here, or None for a section
    base_sequence: int
    payload: bytes
    first_sent: float  # monotonic
    size: int  # sum of the records' sizes
    reported: bool = False  # its delivery report is queued: it is never reported again
    acked_at: float = 0.0  # when its answer came (epoch seconds): the report's latency is to then, not to `poll`
    section: Any = None  # a transcoder_native.Section: records re-batched elsewhere, sealed here

    @property
    def count(self) -> int:
        return len(self.section) if self.section is not None else len(self.records or ())


#: a delivery report as the sender queues it: the error (None: delivered), the batch, its base offset
Report = tuple[ProduceError | None, Batch, int]


@dataclass
class Round:
    """One round of the sender: its Produce requests in flight, by leader (the batches, and the request in flight;
    or the error that kept it from being sent), and the batches not sent (no leader, or not yet in the
    transaction)."""

    started: dict[int, tuple[dict[Partition, Batch], Any]]
    retry: dict[Partition, Batch]


T = TypeVar("T")


def isolate(batch: T, count: int, refused: Collection[int], halves: Callable[[T], tuple[T, T]]) -> list[T]:
    """A batch of `count` records the broker refused for some of them (INVALID_TIMESTAMP, INVALID_RECORD), cut into
    pieces, in order, that are sent again as batches of their own: cut in halves (`halves`, as Section.split cuts:
    the first half count // 2) until each refused record (`refused`: indexes in the batch, as the answer's
    record_errors name them) is alone, the pieces without one kept whole. Only a record refused alone is at fault.
    With no index known (a broker before Produce v8 names none), the two halves: cut again while refused."""
    bad = {i for i in refused if 0 <= i < count}
    if count < 2:
        return [batch]
    if not bad:
        return list(halves(batch))

    def cut(piece: T, start: int, stop: int) -> list[T]:
        if stop - start < 2 or not any(start <= i < stop for i in bad):
            return [piece]
        middle = start + (stop - start) // 2
        first, second = halves(piece)
        return cut(first, start, middle) + cut(second, middle, stop)

    return cut(batch, 0, count)


def record_halves(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """A list of records in halves as a Section splits: the first half len // 2."""
    half = len(records) // 2
    return records[:half], records[half:]
