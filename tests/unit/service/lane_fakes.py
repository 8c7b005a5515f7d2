"""Fakes of a lane's clients for its unit tests: a scripted consumer, a writer on the real Ledger, a fetcher.

The consumer plays a script, one step per consume() (records path) or poll() (record sets) call; a step may call
the rebalance callbacks, acknowledge records, and (records path) hand back records. Once the script is over, the
lane's stop event is set. Every commit the consumer is asked for is checked against what the destination
acknowledged at that moment.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition

from transcoder import config as config_module
from transcoder.kafka.fetcher import Fetched
from transcoder.kafka.writer import ColumnRun, TransactionalSink
from transcoder.kafka.writer.offset_map import NoOffsetMap
from transcoder.metrics.registry import Metrics
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import plan
from transcoder.service.assembly import LaneClients, build_lane
from transcoder.service.lane import Lane

P0, P1 = ("src", 0), ("src", 1)
SIZE = 10  # each record's bytes


class Record:
    def __init__(self, tp: Partition, offset: int) -> None:
        self._tp, self._offset = tp, offset

    def topic(self) -> str:
        return self._tp[0]

    def partition(self) -> int:
        return self._tp[1]

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None


def records(tp: Partition, offsets: range) -> list[Record]:
    return [Record(tp, o) for o in offsets]


def group_metadata(generation: int = 1, member_id: str = "rdkafka-m1", group_id: str = "g") -> bytes:
    """A consumer's group metadata as librdkafka serialises it (`rd_kafka_consumer_group_metadata_write`, CGMDv2)."""
    return b"CGMDv2:" + struct.pack("=i", generation) + f"{group_id}\0{member_id}\0".encode() + b"\x01"


class FakeWriter:
    """A transactional sink (kafka.writer.TransactionalSink, checked below) on the real Ledger; records are
    acknowledged only by `ack` (or a drain)."""

    def __init__(self, destination: str, events: list[Any]) -> None:
        self.events = events
        self.dest = destination
        self.config = config_module.parse({"cluster": {"bootstrap_servers": "k:9092"},
                                           "routes": [{"source": "src", "destinations": [{"codec": "zstd"}]}]},
                                          environ={})
        self.offset_map = NoOffsetMap()
        self.start_ms = 0.0
        self.ledger = Ledger({"src": (destination,)})
        self.acked_total = {destination: 0}
        self.codec_of = {destination: "zstd-3"}
        self.source_of = {destination: "src"}
        self.target_of: dict[str, Any] = {}
        self.error_trackers: list[Any] = []
        self.producers: list[Any] = []
        self.acked_ts: dict[Partition, int] = {}
        self.dead_lettered = 0
        self.transactional_id: str | None = None
        #: source partition -> the offset below which every record was acknowledged
        self.acked_below: dict[Partition, int] = {}
        self.commit_error: KafkaError | Exception | None = None
        #: record sets: a batch of the open transaction failed
        self.doomed = False
        #: set by every abort_transaction; `after_abort` (a test's) runs after each
        self.aborted = threading.Event()
        self.after_abort: Callable[[], None] | None = None
        #: when (monotonic s) the open batch's linger is over; None: no batch open
        self.due: float | None = None
        #: a drain acknowledges everything in flight (False: the destination answers nothing within its timeout)
        self.drains = True

    def write(self, msgs: Iterable[Any], on_error: Callable[[KafkaError], None]) -> tuple[int, int]:
        msgs = list(msgs)
        for m in msgs:
            tp = (m.topic(), m.partition())
            self.ledger.sent({(self.dest, tp[1]): [(m.offset(), SIZE)]}, SIZE)
            self.ledger.consumed({tp: m.offset()})
        return len(msgs), SIZE * len(msgs)

    def write_stored(self, tp: Partition, stored: StoredRecords, now: float, start: int = 0,
                     stop: int | None = None) -> tuple[int, int]:
        offsets = stored.offsets[start:stop]
        self.ledger.sent({(self.dest, tp[1]): [(o, SIZE) for o in offsets]}, SIZE * len(offsets))
        self.ledger.consumed({tp: offsets[-1]})
        self.events.append(("handed", tp, offsets[0], offsets[-1]))
        return len(offsets), SIZE * len(offsets)

    def write_columns(self, run: ColumnRun, start: int) -> tuple[int, int]:
        raise NotImplementedError("a lane never hands its writer columns (the Spark engine's)")

    def ack(self, tp: Partition, n: int | None = None) -> None:
        """The destination acknowledges the oldest `n` records of `tp` in flight (all: None)."""
        q = self.ledger.pending.get((self.dest, tp[1]), ())
        for _ in range(len(q) if n is None else n):
            offset = self.ledger.acked(self.dest, tp[1])
            self.acked_below[tp] = offset + 1
            self.acked_total[self.dest] += 1

    def drain(self, timeout: float) -> None:
        self.events.append("drain")
        if not self.drains:
            return
        for tp in [("src", p) for _, p in list(self.ledger.pending)]:
            self.ack(tp)

    def poll(self, timeout: float) -> None: ...
    def handle_failures(self) -> None: ...
    def tick(self, now: float, flush: bool = False) -> None: ...
    def linger_due(self) -> float | None:
        return self.due

    def flush_acked(self) -> None: ...
    def flush_map(self, timeout: float) -> bool:
        return True

    def final_statistics(self) -> None: ...
    def close(self, timeout: float) -> None: ...

    def begin_transactions(self, transactional_id: str, timeout: float, group_id: str) -> None:
        self.events.append("begin_transactions")
        self.transactional_id = transactional_id
        self.producers = [object()]

    def commit_transaction(self, offsets: list[TopicPartition], group: Any, timeout: float, retrying: Any = None
                           ) -> None:
        if self.commit_error is not None:
            self.events.append("commit_transaction_failed")
            if isinstance(self.commit_error, Exception):
                raise self.commit_error
            raise KafkaException(self.commit_error)
        self.events.append(("commit_transaction", sorted((p.topic, p.partition, p.offset) for p in offsets)))

    def transaction_doomed(self) -> bool:
        return self.doomed

    def replace_producer(self, timeout: float) -> None:
        self.events.append("replace_producer")
        self.ledger.reset()
        self.commit_error = None

    def release_group_offsets(self, partitions: list[TopicPartition], group: Any, timeout: float,
                              known: Mapping[Partition, int] | None = None) -> str | None:
        self.events.append(("release_group_offsets", sorted((p.topic, p.partition) for p in partitions), known))
        return None

    def abort_transaction(self, timeout: float, retrying: Any = None) -> None:
        self.events.append("abort_transaction")
        self.ledger.reset()
        self.aborted.set()
        if self.after_abort is not None:
            self.after_abort()


if TYPE_CHECKING:  # the type checker holds the fake to the Protocol the lane's writer implements
    _fake_is_a_sink: TransactionalSink = FakeWriter("dst", [])


class ScriptedConsumer:
    """What the lane uses of confluent_kafka.Consumer. Each consume() call runs the next step of `script` (the
    records it returns are delivered); once the script is over, `stop` is set."""

    def __init__(self, writer: FakeWriter, events: list[Any], stop: threading.Event) -> None:
        self.writer, self.events, self.stop = writer, events, stop
        self.script: list[Callable[[ScriptedConsumer], list[Record] | None]] = []
        self.assigned: set[Partition] = set()
        self.next_offset: dict[Partition, int] = {}
        self.group: dict[Partition, int] = {}
        self.commit_errors: list[KafkaError] = []
        #: errors the next reads of the group's committed offsets raise, one each
        self.committed_errors: list[KafkaError] = []
        self.callbacks: dict[str, Any] = {}
        #: the consumer's on_commit (the lane's checkpoint), and the answers to asynchronous commits its next poll
        #: or consume serves
        self.on_commit: Callable[[KafkaError | None, list[TopicPartition]], None] = lambda err, tps: None
        self.answers: list[tuple[KafkaError | None, list[TopicPartition]]] = []
        #: this member's generation and member id, as its group metadata carries them (librdkafka resets them, -1 and
        #: "", when the group drops it)
        self.generation, self.member_id = 1, "rdkafka-m1"
        self._delivered = False
        self._in_callback = False

    # the group
    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any, on_lost: Any) -> None:
        self.callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}

    def rebalance(self, what: str, tps: list[Partition]) -> None:
        self.events.append((what, sorted(tps)))
        self._in_callback = True
        try:
            self.callbacks[what](self, [TopicPartition(t, p) for t, p in tps])
        finally:
            self._in_callback = False
        if what != "assign":
            self.assigned.difference_update(tps)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if self.committed_errors:
            raise KafkaException(self.committed_errors.pop(0))
        return [TopicPartition(p.topic, p.partition, self.group.get((p.topic, p.partition), OFFSET_INVALID))
                for p in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        for p in partitions:
            self.assigned.add((p.topic, p.partition))
            self.next_offset[(p.topic, p.partition)] = max(p.offset, 0)

    assign = incremental_assign

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("pause", sorted((p.topic, p.partition) for p in partitions)))

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("resume", sorted((p.topic, p.partition) for p in partitions)))

    def seek(self, p: TopicPartition) -> None:
        self.events.append(("seek", (p.topic, p.partition), p.offset))
        self.next_offset[(p.topic, p.partition)] = p.offset

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, self.next_offset.get((p.topic, p.partition), OFFSET_INVALID))
                for p in partitions]

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        """As librdkafka: an asynchronous commit's outcome is its answer, served by the next poll or consume."""
        if self.commit_errors:
            self.events.append("commit_refused")
            err = self.commit_errors.pop(0)
            if not asynchronous:
                raise KafkaException(err)
            self.answers.append((err, offsets))
            return
        for p in offsets:
            tp = (p.topic, p.partition)
            assert tp in self.assigned, f"{tp} committed while not assigned"
            assert p.offset <= self.writer.acked_below.get(tp, 0), f"{tp} committed past an unacknowledged record"
            self.group[tp] = p.offset
        self.events.append(("commit", sorted((p.topic, p.partition, p.offset) for p in offsets)))
        if asynchronous:
            self.answers.append((None, offsets))

    def _answer(self) -> None:
        answers, self.answers = self.answers, []
        for err, offsets in answers:
            self.on_commit(err, [TopicPartition(p.topic, p.partition, p.offset) for p in offsets])

    def consumer_group_metadata(self) -> bytes:
        return group_metadata(self.generation, self.member_id)

    def _served_outside_callbacks(self, call: str) -> None:
        """confluent-kafka serves callbacks in poll, consume, close and the metadata calls; one of them made on the
        consumer inside its own callback clears the callback state of the call around it, and the next callback of
        that call aborts the process (CallState_get: Assertion `cs != NULL' failed)."""
        if self._in_callback:
            raise AssertionError(f"consumer.{call}() inside the consumer's own callback aborts the process")

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._served_outside_callbacks("list_topics")
        raise NotImplementedError("the lane asks its topic-id client for partition counts")

    def poll(self, timeout: float) -> None:
        """Record sets: the group's callbacks only (the fetcher reads the records)."""
        self._served_outside_callbacks("poll")
        self._answer()
        if not self.script:
            self.stop.set()
            return
        self.script.pop(0)(self)

    # the records
    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        self._served_outside_callbacks("consume")
        self._answer()
        if self._delivered:  # the lane asks what arrived along with the records just delivered: nothing more
            self._delivered = False
            return []
        if not self.script:
            self.stop.set()
            return []
        got = self.script.pop(0)(self) or []
        self._delivered = bool(got)
        for m in got:
            self.next_offset[(m.topic(), m.partition())] = m.offset() + 1
        return got

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, self.next_offset.get((tp.topic, tp.partition), 0)

    def close(self) -> None:  # as librdkafka: what is still assigned is revoked
        self._served_outside_callbacks("close")
        if self.assigned:
            self.rebalance("revoke", sorted(self.assigned))


class StoredRecords:
    """What the lane uses of transcoder_native.StoredRecords: records of SIZE bytes each."""

    def __init__(self, offsets: list[int]) -> None:
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def span(self, start: int, stop: int) -> tuple[int, int, int]:
        return self.offsets[start], self.offsets[stop - 1], SIZE * (stop - start)

    def fit(self, start: int, max_bytes: int) -> int:
        """The index after the records from `start` that fit in `max_bytes` (at least one)."""
        return min(len(self.offsets), start + max(1, max_bytes // SIZE))


class FakeFetcher:
    """What the lane uses of transcoder.kafka.fetcher.Fetcher; `log` holds the source's offsets (a step appends)."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.log: dict[Partition, list[int]] = {}
        self.positions: dict[Partition, int] = {}
        self.paused: set[Partition] = set()
        self.unknown_topics: set[str] = set()
        #: each fetch's `until`, in order
        self.untils: list[float | None] = []

    def assign(self, starts: dict[Partition, int | str | None]) -> None:
        self.events.append(("fetch_from", dict(starts)))
        for tp, off in starts.items():
            self.positions[tp] = off if isinstance(off, int) else 0

    def revoke(self, tps: list[Partition]) -> None:
        for tp in tps:
            self.positions.pop(tp, None)
            self.paused.discard(tp)

    def fetch(self, budget: int | None = None, skip: Any = (), until: float | None = None) -> dict[Partition, Fetched]:
        self.untils.append(until)
        got = {}
        for tp, pos in self.positions.items():
            if tp in self.paused or tp in skip:
                continue
            offsets = [o for o in self.log.get(tp, []) if o >= pos]
            if offsets:
                got[tp] = Fetched(StoredRecords(offsets), end=offsets[-1] + 1)
                self.positions[tp] = offsets[-1] + 1
        return got

    def take_losses(self) -> list[Any]:
        return []

    def close(self) -> None: ...


class NoTopicIds:
    def __init__(self) -> None:
        #: topic -> its partition count now
        self.partitions: dict[str, int] = {}

    def now(self, topics: Any) -> dict[str, str]:
        return {}

    def partition_count(self, topic: str) -> int | None:
        return self.partitions.get(topic)

    def answers(self) -> dict[str, str]:
        return {}

    def ask(self, topics: Any) -> None: ...
    def close(self) -> None: ...


class NoEnds:
    def __init__(self) -> None:
        self.known: dict[Partition, int] = {}

    def refresh(self, tps: Any) -> None: ...
    def forget(self, tps: Any) -> None: ...
    def close(self) -> None: ...


def lane(lane_args: dict[str, Any] | None = None, topic_partitions: dict[str, int] | None = None,
         **settings: Any) -> tuple[Lane, ScriptedConsumer, FakeWriter, list[Any], threading.Event]:
    """A lane on the records path (unless `hot_path` says otherwise) copying topic src, its clients fakes;
    `lane_args` go to build_lane, `topic_partitions` are what its topic-id client answers."""
    raw = {"cluster": {"bootstrap_servers": "k:9092"}, "hot_path": "records", "commit_interval_ms": 60_000,
           "routes": [{"source": "src", "destinations": [{"codec": "zstd", "level": 3}]}], **settings}
    conf = config_module.parse(raw, environ={})
    spec = plan(conf, ["src"]).lanes[0]
    events: list[Any] = []
    stop = threading.Event()
    writer = FakeWriter(spec.targets[0].topic_for("src"), events)
    consumer = ScriptedConsumer(writer, events, stop)
    fetcher = FakeFetcher(events) if conf.batched else None
    topic_ids = NoTopicIds()
    topic_ids.partitions.update(topic_partitions or {})
    the_lane = build_lane(spec, conf, Metrics().lane(spec.name), **(lane_args or {}),
                          clients=LaneClients(writer, consumer, topic_ids, NoEnds(), fetcher))  # type: ignore[arg-type]
    consumer.on_commit = the_lane.checkpoint.answered  # a real consumer's is in its configuration (on_commit)
    return the_lane, consumer, writer, events, stop


def commits(events: list[Any]) -> list[list[tuple[str, int, int]]]:
    return [e[1] for e in events if isinstance(e, tuple) and e[0] in ("commit", "commit_transaction")]


