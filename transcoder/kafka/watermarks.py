"""End offsets of a consumer's partitions, asked of the broker without blocking.

librdkafka learns a partition's end (high watermark, last stable offset) only from its Fetch
responses. Fetching stops while a lane is paused by backpressure or its prefetch queue is full,
so the lag its statistics give stops growing exactly when the destination falls behind. A lane
therefore asks the broker (ListOffsets, read_committed like its consumer) at each statistics
emission, through an admin client of its own created at the first; the answers are read at the
next emission.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import structlog
from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from transcoder.kafka.clients import OwnedAdmin
from transcoder.pipeline.partitions import Partition

log = structlog.get_logger("transcoder.lane")

#: a query the broker does not answer in this time is dropped (and asked again at the next emission)
_TIMEOUT_S = 10.0


class EndOffsets:
    """The read_committed end offset of each partition asked for; one query at a time. Its owner calls `close`."""

    def __init__(self, cluster: Mapping[str, Any], client_id: str,
                 create: Callable[[Callable[[], Any]], Any] = lambda make: make()) -> None:
        self._admin = OwnedAdmin(cluster, client_id, create)
        self._pending: dict[TopicPartition, Future[Any]] = {}
        self.known: dict[Partition, int] = {}

    def refresh(self, partitions: Iterable[Partition]) -> None:
        """Take in the answers of the query in flight, if all came; then ask again for `partitions`."""
        if self._pending:
            if not all(f.done() for f in self._pending.values()):
                return
            for tp, f in self._pending.items():
                try:
                    self.known[(tp.topic, tp.partition)] = f.result().offset
                except KafkaException as exc:  # the figure stays as it was; the lane's readiness reports outages
                    log.debug("end_offset_query_failed", topic=tp.topic, partition=tp.partition, error=str(exc))
            self._pending = {}
        wanted = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
        if not wanted:
            return
        self._pending = self._admin.client().list_offsets(wanted, isolation_level=IsolationLevel.READ_COMMITTED,
                                                 request_timeout=_TIMEOUT_S)

    def close(self) -> None:
        self._pending = {}
        self._admin.close()

    def forget(self, partitions: Iterable[Partition]) -> None:
        """Drop what is known of `partitions`: they are no longer the lane's."""
        for tp in partitions:
            self.known.pop(tp, None)
