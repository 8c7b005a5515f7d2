"""`build_sink`: the one place that reads a lane's guarantee and copy path for its writer, and builds the sink of
that mode (kafka.writer.records, kafka.writer.record_sets) from the parts every mode shares."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import structlog
from confluent_kafka import Producer

from transcoder.config import Config
from transcoder.errors import TranscoderError
from transcoder.kafka.clients import start_threads
from transcoder.kafka.offset_map_topic import OffsetMapRecorder
from transcoder.kafka.writer.deliveries import Deliveries
from transcoder.kafka.writer.failures import DeadLetters, DeadLetterTopic, Failures, NoDeadLetters
from transcoder.kafka.writer.metrics import WriterMetrics
from transcoder.kafka.writer.offset_map import NoOffsetMap, OffsetMap, RecordedMap
from transcoder.kafka.writer.parts import SinkParts
from transcoder.kafka.writer.producers import ClientFactory, build_client, dlq_producer_config
from transcoder.kafka.writer.record_sets import RecordSetsSink, TransactionalRecordSetsSink
from transcoder.kafka.writer.records import RecordsSink, TransactionalRecordsSink
from transcoder.kafka.writer.sink import Sink, TransactionalSink
from transcoder.kafka.writer.transactions import WriterTransactions, bounded, direct
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.routes import Target

log = structlog.get_logger("transcoder.writer")


def build_sink(config: Config, name: str, targets: Sequence[Target], metrics: WriterMetrics, *, batched: bool,
               create: ClientFactory = build_client, start_ms: float | None = None,
               cpu: Callable[[], float] | None = None) -> Sink:
    """The sink of lane `name` writing the records of `targets`: record sets (`batched`: fed `write_stored`) or
    records, at least once or (config.guarantee) exactly once, which is then a TransactionalSink. `create` builds
    its clients (an engine attributes their threads to the lane); `start_ms`: the engine's start (epoch ms),
    before which records are backlog (now by default); `cpu`: the lane's CPU seconds so far (published with the
    offset map's health)."""
    exactly_once = config.guarantee == "exactly-once"
    if exactly_once and len(targets) != 1:
        raise TranscoderError(f"lane {name}: exactly-once needs one destination per lane, not {len(targets)}")
    parts = sink_parts(config, name, targets, metrics, create=create, start_ms=start_ms, map_external=exactly_once,
                       cpu=cpu)
    if exactly_once:
        # librdkafka's calls can block past their timeouts (run on a thread, given up); transcoder's cannot
        transactions = WriterTransactions(name, config.transaction_timeout_ms, logger=log,
                                          blocking=direct if batched else bounded)
        transactional: TransactionalSink = TransactionalRecordSetsSink(parts, targets[0], transactions) if batched \
            else TransactionalRecordsSink(parts, targets[0], transactions)
        return transactional
    return RecordSetsSink(parts) if batched else RecordsSink(parts)


def sink_parts(config: Config, name: str, targets: Sequence[Target], metrics: WriterMetrics, *,
               create: ClientFactory = build_client, start_ms: float | None = None,
               map_external: bool = False, cpu: Callable[[], float] | None = None) -> SinkParts:
    """The parts every sink is given. `map_external`: the offset map is written by the sink's transactional
    producer (exactly-once: a map entry is visible exactly when its records are)."""
    sources = tuple(dict.fromkeys(s for t in targets for s in t.sources))
    ledger = Ledger({s: tuple(t.topic_for(s) for t in targets if s in t.sources) for s in sources})
    source_of = {t.topic_for(s): s for t in targets for s in t.sources}
    codec_of = {t.topic_for(s): t.destination.label for t in targets for s in t.sources}
    offset_map = _offset_map(config, name, create, external=map_external)
    deliveries = Deliveries(ledger, metrics, source_of, codec_of, offset_map,
                            time.time() * 1000 if start_ms is None else start_ms)
    dead_letters: DeadLetterTopic = NoDeadLetters(name)
    if config.errors.tolerance == "all":
        dead_letters = DeadLetters(Producer(dlq_producer_config(config, name)), config.errors.dlq_topic, name, ledger,
                                   metrics.dead_lettered)
    failures = Failures(ledger, metrics.error, dead_letters)
    return SinkParts(config, name, tuple(targets), deliveries, failures, dead_letters, offset_map, create, cpu)


def _offset_map(config: Config, name: str, create: ClientFactory, *, external: bool) -> OffsetMap:
    """With a `migration:` section, where each delivered record came from (the offset map); else nothing."""
    if config.migration is None:
        return NoOffsetMap()
    return RecordedMap(OffsetMapRecorder(config, f"transcoder-{name}-offset-map", make=lambda conf: create(
        "offset-map", lambda: Producer(conf), start_threads), external=external))
