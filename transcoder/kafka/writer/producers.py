"""The producers a sink (kafka.writer) builds: librdkafka's for a destination whose batches
librdkafka makes, transcoder's BatchProducer for one whose batches transcoder makes, a producer that sends refused
records one by one, and the dead-letter topic's; and the factory that creates them (an engine's attributes the
clients' threads to its lane).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from transcoder.config import Batch, Config
from transcoder.kafka.clients import client_config
from transcoder.kafka.producer import BatchProducer, Transactions
from transcoder.kafka.statistics import TopicProduce
from transcoder.kafka.writer.failures import Record
from transcoder.pipeline.routes import Target

LARGEST_RECORD = 64 * 1024 * 1024  # producer-side bound; the broker's max.message.bytes applies to the batch

#: Builds a client: (part, make, start) -> client. An engine passes one that attributes the client's
#: threads to (lane, part) for CPU accounting; `start` makes the client start its threads.
ClientFactory = Callable[[str, Callable[[], Any], Callable[[Any], None] | None], Any]


def build_client(part: str, make: Callable[[], Any], start: Callable[[Any], None] | None) -> Any:
    """The ClientFactory of a sink given none: the client made, then started if `start` says how."""
    client = make()
    if start is not None:
        start(client)
    return client


def producer_config(config: Config, client_id: str, target: Target,
                    on_delivery: Callable[[KafkaError | None, Record], None],
                    stats_cb: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The librdkafka producer of one destination: its codec, level and batching, idempotent."""
    d = target.destination
    extra: dict[str, Any] = {
        "client.id": client_id,
        "enable.idempotence": True,  # order within a partition holds across retries
        "compression.type": d.codec,
        "linger.ms": d.batch.linger_ms,
        "batch.size": d.batch.max_bytes,
        "batch.num.messages": d.batch.max_records,
        "message.max.bytes": max(LARGEST_RECORD, d.batch.max_bytes + Batch.PRODUCER_MARGIN_BYTES),
        # The engine stops reading at max_in_flight_bytes; the queue only has to be larger.
        "queue.buffering.max.kbytes": min(2 * config.max_in_flight_bytes // 1024 + 1024, 2**31 - 1),
        "queue.buffering.max.messages": 10_000_000,
        "on_delivery": on_delivery,
    }
    if stats_cb is not None:
        extra["statistics.interval.ms"] = config.metrics.stats_interval_ms
        extra["stats_cb"] = stats_cb
    if d.level is not None:
        extra["compression.level"] = d.level
    return client_config(config.target_cluster.librdkafka(), **extra)


def isolating_producer_config(config: Config, client_id: str, target: Target) -> dict[str, Any]:
    """A producer like the target's (`producer_config`), sending each record as a batch of its own; its delivery
    callbacks are given per record."""
    conf = producer_config(config, client_id, target, lambda e, m: None)
    del conf["on_delivery"]
    conf.update({"batch.num.messages": 1, "linger.ms": 0})
    return conf


def dlq_producer_config(config: Config, name: str) -> dict[str, Any]:
    """The producer of lane `name`'s dead-letter topic: idempotent, zstd, any record up to LARGEST_RECORD."""
    return client_config(config.target_cluster.librdkafka(), **{
        "client.id": f"transcoder-{name}-dlq", "enable.idempotence": True,
        "compression.type": "zstd", "message.max.bytes": LARGEST_RECORD + 65536,
        "linger.ms": 50,
    })


def batch_producer(config: Config, client_id: str, target: Target,
                   on_delivery: Callable[[KafkaError | None, Any], None],
                   on_stats: Callable[[dict[str, TopicProduce]], None],
                   on_batch: Callable[[KafkaError | None, str, int, int, Any], None] | None = None,
                   transactions: Transactions | None = None) -> BatchProducer:
    """The producer of a destination whose batches transcoder builds itself: every destination of a lane that
    fetches raw batches (`on_batch`: their reports; `transactions`: exactly-once), and zstd 13-22 (librdkafka
    refuses them) otherwise."""
    d = target.destination
    return BatchProducer(
        config.target_cluster.librdkafka(), codec=d.codec, level=d.level, client_id=client_id,
        linger_ms=d.batch.linger_ms, max_bytes=d.batch.max_bytes, max_records=d.batch.max_records,
        on_delivery=on_delivery, on_stats=on_stats, stats_interval_ms=config.metrics.stats_interval_ms,
        queue_max_bytes=2 * config.max_in_flight_bytes + (1 << 20), on_batch=on_batch, transactions=transactions,
    )
