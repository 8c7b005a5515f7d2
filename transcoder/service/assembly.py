"""Builds a lane from its parts: the one place in the service that reads the guarantee and the copy path.

`build_lane` chooses, once: the copy path (RecordSets over a Fetcher, or Records through librdkafka), the
checkpoint (AtLeastOnce, or ExactlyOnce with its TransactionDrain on record sets), the group's assignment style
(cooperative, or eager for exactly-once), live scoring's capture (or a no-op), and hands the lane its parts.
Afterwards nothing in the service asks which mode it is in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer

from transcoder.config import Config
from transcoder.evaluate.live_scoring import Scorer
from transcoder.kafka.clients import client_config, start_threads
from transcoder.kafka.fetcher import Fetcher
from transcoder.kafka.topic_ids import TopicIds
from transcoder.kafka.watermarks import EndOffsets
from transcoder.kafka.writer import Sink, TransactionalSink, build_sink
from transcoder.metrics.cpu import ThreadLedger
from transcoder.metrics.registry import LaneMetrics
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.catch_up import CatchUp
from transcoder.pipeline.commits import transactional_id
from transcoder.pipeline.partition_book import PartitionBook
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import LaneSpec
from transcoder.service.checkpoint import AtLeastOnce, Checkpoint, ExactlyOnce
from transcoder.service.copy_paths import CopyPath, Reading, Records, Sampling
from transcoder.service.destinations import DestinationPartitions
from transcoder.service.group import Cooperative, Eager, Group
from transcoder.service.lane import CallbackErrors, Lane, LaneParts
from transcoder.service.readiness import STALL_S, Readiness
from transcoder.service.record_sets import RecordSets
from transcoder.service.source_watch import SourceWatch
from transcoder.service.transaction_drain import NoDrain, TransactionDrain

#: The batched path's Fetch waits up to this long for records (fetch.wait.max.ms): the loop's other duties
#: (linger, commits, reports) come round at least this often.
FETCH_WAIT_MS = 100


#: How often a lane's consumer looks for partitions added to its sources (librdkafka's default: 5 min), unless
#: cluster.config sets topic.metadata.refresh.interval.ms: a partition added is then copied or named sooner.
METADATA_REFRESH_MS = 30_000


def consumer_config(config: Config, lane: LaneSpec) -> dict[str, Any]:
    start = config.start if isinstance(config.start, str) else "earliest"
    return client_config({"topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS, **config.cluster.librdkafka()},
                         **{
        "group.id": lane.group_id,
        "client.id": f"transcoder-{lane.name}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Never reset silently: a position whose records are gone (retention, DeleteRecords, a recreated topic) is
        # an error the lane reports (on_source_loss); partitions never committed start where `start` says, assigned
        # explicitly (Lane._assign). The batched path's consumer fetches nothing.
        "auto.offset.reset": start if config.batched else "error",
        # exactly-once: eager rebalancing, so every assignment is whole and names the transactional id
        "partition.assignment.strategy": "roundrobin" if config.guarantee == "exactly-once" else "cooperative-sticky",
        # Aborted transactions are not copied; what the source's readers see is what is copied.
        "isolation.level": "read_committed",
        # Bounded prefetch: memory stays bounded even when every target is slow.
        "queued.max.messages.kbytes": 32 * 1024,
        # Once the prefetch queue is full (queued.min.messages or the bytes above), the next fetch
        # waits this long; librdkafka's default (1000 ms) left a lane idle half of the time (bench/).
        "fetch.queue.backoff.ms": 20,
        "statistics.interval.ms": config.metrics.stats_interval_ms,
    })


@dataclass(frozen=True)
class LaneClients:
    """A lane's Kafka clients: built by `lane_clients`, or fakes handed in by a unit test."""

    writer: Sink
    consumer: Consumer
    #: the sources' topic ids (a topic deleted and recreated: a new id)
    topic_ids: TopicIds
    #: the partitions' ends, asked of the broker each statistics emission
    ends: EndOffsets
    #: record sets: the raw Fetches; None: records are consumed through librdkafka
    fetcher: Fetcher | None


def lane_clients(spec: LaneSpec, config: Config, metrics: LaneMetrics, threads: ThreadLedger,
                 consumer_conf: dict[str, Any]) -> LaneClients:
    """A lane's clients, each thread they start counted as the lane's (ThreadLedger)."""
    writer = build_sink(config, spec.name, spec.targets, metrics, batched=config.batched,
                        create=lambda part, make, start: threads.create((spec.name, part), make, start),
                        cpu=lambda: lane_cpu(threads, spec.name))
    topic_ids = TopicIds(config.cluster.librdkafka(), f"transcoder-{spec.name}-ids",
                         lambda make: threads.create((spec.name, "consume"), make))
    consumer: Consumer = threads.create(  # type: ignore[assignment]  # create returns what `make` built
        (spec.name, "consume"), lambda: Consumer(consumer_conf), start_threads)
    ends = EndOffsets(config.cluster.librdkafka(), f"transcoder-{spec.name}-ends",
                      lambda make: threads.create((spec.name, "consume"), make))
    # the Fetcher's I/O thread (socket reads) counts as the lane's consuming, as librdkafka's consumer threads do on
    # the records path
    fetcher: Fetcher | None = threads.create(  # type: ignore[assignment]
        (spec.name, "consume"), lambda: Fetcher(
            config.cluster.librdkafka(), f"transcoder-{spec.name}-fetch",
            reset=config.start if isinstance(config.start, str) else "earliest", max_wait_ms=FETCH_WAIT_MS,
            past_loss=config.on_source_loss == "continue"),
        lambda f: f.connect()) if config.batched else None  # type: ignore[attr-defined]
    return LaneClients(writer, consumer, topic_ids, ends, fetcher)


def lane_cpu(threads: ThreadLedger, lane: str) -> float:
    """CPU seconds of the lane's threads so far (its loop, its clients', the compression pool's share)."""
    return sum(cpu for owner, cpu in threads.cpu_by_owner().items()
               if isinstance(owner, tuple) and owner and owner[0] == lane)


class NoSampling:
    """Live scoring off: never capturing, never due."""

    capturing = False
    due = math.inf

    def offer(self, msgs: Sequence[Any]) -> None: ...
    def tick(self, now: float) -> None: ...


class _Relay:
    """A callback of the consumer (stats_cb, on_commit), bound to the part that takes it once that part is built
    (the consumer is built first)."""

    def __init__(self) -> None:
        self.to: Callable[..., None] = lambda *args: None

    def __call__(self, *args: Any) -> None:
        self.to(*args)


def build_lane(spec: LaneSpec, config: Config, metrics: LaneMetrics,
               end_offsets: dict[Partition, tuple[int, int]] | None = None,
               threads: ThreadLedger | None = None, scorer: Scorer | None = None,
               destination_partitions: dict[str, int] | None = None,
               extend_destination: Callable[[str, int], None] | None = None,
               own_destinations: set[str] | None = None, clients: LaneClients | None = None) -> Lane:
    """A lane of `spec`: its clients (`clients`: fakes handed in by a unit test) and its parts, chosen once by
    config.guarantee and config.batched (the copy path)."""
    threads = threads or ThreadLedger()
    relay, answers = _Relay(), _Relay()
    conf = {**consumer_config(config, spec), "stats_cb": relay, "on_commit": answers}
    clients = clients or lane_clients(spec, config, metrics, threads, conf)
    writer, consumer, ledger = clients.writer, clients.consumer, clients.writer.ledger
    eos = config.guarantee == "exactly-once"
    txn_writer: TransactionalSink | None = None
    if eos:
        if not isinstance(writer, TransactionalSink):  # build_sink makes one under exactly-once; a test's fake may not
            raise TypeError(f"lane {spec.name}: exactly-once needs a transactional sink, not {type(writer).__name__}")
        txn_writer = writer
    status = LaneStatus(name=spec.name, group_id=spec.group_id, acked=writer.acked_total,
                        destinations={d: (s, writer.codec_of[d]) for d, s in writer.source_of.items()})
    book = PartitionBook(first_reads=eos)
    readiness = Readiness(spec.name, status, writer, ledger, conf["error_cb"],
                          one_cluster=config.destination_cluster is None,
                          stall_s=max(STALL_S, 2 * max(t.destination.batch.linger_ms for t in spec.targets) / 1000),
                          assigned=lambda: book.assigned)
    drain: NoDrain | TransactionDrain = TransactionDrain(
        spec.name, config.transaction_timeout_ms, config.commit_interval_ms, config.max_in_flight_bytes, ledger,
        txn_writer) if txn_writer is not None and clients.fetcher is not None \
        else NoDrain(config.max_in_flight_bytes, ledger)
    watch = SourceWatch(spec.name, config, clients.topic_ids,
                        int(conf.get("topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS)) / 1000,
                        book=book, ledger=ledger, metrics=metrics,
                        writer=writer)
    sampler: Sampling = scorer.sampler({d: (s, writer.target_of[d].destination)
                                        for d, s in writer.source_of.items()}, time.monotonic()) \
        if scorer is not None else NoSampling()
    callback_errors = CallbackErrors()
    counted = _Counted(status, metrics)
    group: Group = Eager() if eos else Cooperative()
    reading = Reading(spec.name, config.start, consumer, writer, book, group, watch, sampler, counted,
                      callback_errors.raise_pending)
    path: CopyPath = RecordSets(reading, clients.fetcher, drain) if clients.fetcher is not None else \
        Records(reading, continue_past_loss=config.on_source_loss == "continue")
    checkpoint: Checkpoint = ExactlyOnce(
        spec.name, txn_writer, consumer, status, config.shutdown_timeout_s, book, readiness, group_id=spec.group_id,
        transactional_id=lambda tps: transactional_id(spec.group_id, tps), rewind=path.rewind,
        drain=drain) if txn_writer is not None else AtLeastOnce(
        spec.name, writer, consumer, status, config.shutdown_timeout_s, book, readiness)
    watch.read_through(path, checkpoint)  # both built after the watch: they report to it
    parts = LaneParts(
        status=status, book=book, path=path, checkpoint=checkpoint, watch=watch, readiness=readiness,
        sampler=sampler, callback_errors=callback_errors,
        destinations=DestinationPartitions(spec.name, destination_partitions or {}, ledger.destinations_of,
                                           clients.topic_ids, writer, extend_destination, own_destinations),
        catch_up=CatchUp(end_offsets) if end_offsets is not None else None)
    lane = Lane(spec, config, metrics, writer=writer, consumer=consumer, ends=clients.ends, parts=parts,
                threads=threads)
    relay.to = lane.on_consumer_stats
    answers.to = checkpoint.answered
    return lane


class _Counted:
    """Records (and their bytes) handed to the writer, into the lane's status and metrics."""

    def __init__(self, status: LaneStatus, metrics: LaneMetrics) -> None:
        self.status = status
        self.metrics = metrics

    def __call__(self, n: int, nbytes: int) -> None:
        self.status.records += n
        self.status.source_bytes += nbytes
        self.metrics.records(n, nbytes)
