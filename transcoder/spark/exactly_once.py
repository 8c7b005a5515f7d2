"""exactly-once on Spark: each task writes its source partition's run of a micro-batch in Kafka transactions that
also commit the lane's consumer-group offset of that partition; a replayed run skips what they already hold.

Why this is exactly-once, whatever dies when:
- A task's transactional id is the lane group's and its one source partition's (pipeline.commits.transactional_id).
  Its first call (`begin`) takes the id over: any earlier holder (the same task retried, a speculative copy, a task
  of a driver that was killed) is fenced, and the transaction it left open is aborted by the broker before the
  call returns. Its records are invisible to read_committed readers, and it can commit nothing more.
- Only then the task reads the group's committed offset of its partition (read_committed: KIP-447's stable
  offsets). Every record below it is in a committed transaction; the task writes from there on.
- Each transaction holds records and the offset after its last one (TxnOffsetCommit), so a transaction's records
  are committed exactly when the offset that says so is. The task commits every commit_interval_ms and at its end.
- Spark's checkpoint commits a micro-batch only after every task returned. A driver killed after tasks committed
  but before the checkpoint did replays the micro-batch with the same offset ranges (Spark's offset log is written
  before the batch runs): its tasks find the group's offsets at or past their runs' ends and write nothing. A
  task that failed half-way committed a prefix: its retry writes the rest.
So the destination holds every source record once, as read_committed readers see it; and the group's offsets show
the copy's progress to kafka-consumer-groups and lag monitors.

One source partition's records must reach one task: the engine never splits a Kafka partition across tasks
(Spark's `minPartitions` is not set), and Spark's speculation is refused (two attempts would fence each other).
"""

from __future__ import annotations

import time

import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

from transcoder.config import Config
from transcoder.errors import DeliveryError, KafkaUnavailableError
from transcoder.kafka.clients import client_config, retriable
from transcoder.kafka.retries import RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS
from transcoder.kafka.writer import TransactionalSink as Writer
from transcoder.kafka.writer.transactions import TransactionStuck
from transcoder.pipeline.commits import transactional_id
from transcoder.pipeline.partitions import Partition, show
from transcoder.pipeline.routes import LaneSpec

log = structlog.get_logger("transcoder.spark")

#: (config fingerprint, lane) -> this Python worker's client of the lane's group: under exactly-once on the
#: destination cluster (where the transactions commit its offsets: their group metadata, and the committed offsets
#: read back), else on the source cluster (spark.commit_group: the offsets a task's acknowledged records reach)
_GROUPS: dict[tuple[str, str], Consumer] = {}


def group_client(config: Config, fingerprint: str, lane: LaneSpec) -> Consumer:
    key = (fingerprint, lane.name)
    found = _GROUPS.get(key)
    if found is None:
        close_groups(fingerprint)  # another config's (an earlier engine in this Spark application): idle
        cluster = config.target_cluster if config.guarantee == "exactly-once" else config.cluster
        found = _GROUPS[key] = Consumer(client_config(cluster.librdkafka(), **{
            "group.id": lane.group_id, "client.id": f"transcoder-{lane.name}-group",
            "enable.auto.commit": False, "isolation.level": "read_committed"}))
    return found


class TaskTransactions:
    """One task's transactions over its one source partition: begun at its first record, committed every
    commit_interval_ms and at its end, each with the group's offset after its last record."""

    def __init__(self, config: Config, lane: LaneSpec, writer: Writer, group: Consumer) -> None:
        self.lane = lane
        self.writer = writer
        self.group = group
        self.timeout_s = config.shutdown_timeout_s
        self.interval_s = config.commit_interval_ms / 1000
        self.partition: Partition | None = None
        #: the group's committed offset of the partition when the task began: records below it are copied already
        self.committed: int | None = None
        self._next: int | None = None  # the offset after the last record written and not yet committed
        self._since = 0.0

    def begin(self, tp: Partition) -> None:
        """Take the partition's transactional id over (fencing any earlier holder), then read where its copy
        stands."""
        self.partition = tp
        tid = transactional_id(self.lane.group_id, [tp])
        self.writer.begin_transactions(tid, self.timeout_s, self.lane.group_id)
        got = self._committed(tp)
        if got.error is not None:
            raise KafkaUnavailableError(f"lane {self.lane.name}: the committed offset of {show([tp])} for group "
                                        f"{self.lane.group_id} cannot be read: {got.error.str()}", retriable=True,
                                        topic=tp[0], partition=tp[1])
        self.committed = got.offset if got.offset >= 0 else None
        self._since = time.monotonic()
        log.debug("task_transactions_begun", lane=self.lane.name, transactional_id=tid, partition=show([tp]),
                  committed=self.committed)

    def _committed(self, tp: Partition) -> TopicPartition:
        """The group's committed offset of `tp`, asked again after Kafka's back-off while the group's coordinator
        moves or loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: seen on a broker just started), for at most
        `timeout_s`."""
        retrying = Retrying(retry=retry_if_exception(lambda e: isinstance(e, KafkaException) and retriable(e.args[0])),
                            stop=stop_after_delay(self.timeout_s), reraise=True,
                            wait=wait_exponential_jitter(multiplier=RETRY_BACKOFF_MS / 1000,
                                                         max=RETRY_BACKOFF_MAX_MS / 1000, jitter=0.02))
        return retrying(lambda: self.group.committed([TopicPartition(*tp)], timeout=self.timeout_s)[0])

    def written(self, next_offset: int) -> None:
        """Records up to `next_offset` (exclusive) are in the open transaction; commit it when it is due."""
        self._next = next_offset
        if time.monotonic() - self._since >= self.interval_s:
            self.commit()

    def commit(self) -> None:
        """Commit the open transaction with the offset after its last record (nothing to do when it holds none).
        DeliveryError when Kafka makes it abort: it is aborted, and the task fails with the micro-batch
        uncommitted (a restart finds the group's last committed offset and copies from there)."""
        if self._next is None or self.partition is None:
            return
        offsets = [TopicPartition(self.partition[0], self.partition[1], self._next)]
        try:
            self.writer.commit_transaction(offsets, self.group.consumer_group_metadata(), self.timeout_s)
        except (KafkaException, TransactionStuck) as exc:
            why = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
            if isinstance(exc, KafkaException):
                self.writer.abort_transaction(self.timeout_s)
            raise DeliveryError(f"lane {self.lane.name}: the transaction of {show([self.partition])} up to offset "
                                f"{self._next} was aborted: {why}", topic=self.partition[0],
                                partition=self.partition[1], offset=self._next) from exc
        self.writer.flush_acked()
        self.committed, self._next, self._since = self._next, None, time.monotonic()


def refusal(config: Config) -> str | None:
    """Why the Spark engine cannot copy this config exactly once, or None."""
    speculation = str(config.spark.conf.get("spark.speculation", "false")).lower()
    if config.guarantee == "exactly-once" and speculation == "true":
        return ("guarantee exactly-once on Spark needs spark.speculation false: a speculative copy of a task "
                "fences the first (both write one partition under one transactional id)")
    return None


def close_groups(fingerprint: str | None = None) -> None:
    """Close this worker's group clients (of every config but `fingerprint`)."""
    for key in [k for k in _GROUPS if k[0] != fingerprint]:
        _GROUPS.pop(key).close()

