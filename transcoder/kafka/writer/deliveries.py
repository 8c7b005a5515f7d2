"""What a sink learns from its producers, whatever its mode: delivery reports (per record, or per batch) into the
ledger, the acknowledgement counts and timestamps, the latency samples, the offset map; and their statistics."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from transcoder.kafka.producer import Delivered
from transcoder.kafka.statistics import TopicProduce, producer_topics
from transcoder.kafka.writer.failures import Failure, Record
from transcoder.kafka.writer.metrics import WriterMetrics, new_and_backlog
from transcoder.kafka.writer.offset_map import MapAdd, OffsetMap
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition

#: A failed record and Kafka's error code for it: where a sink puts it (kept, or sent again alone)
OnFailure = Callable[[Failure, int], None]
#: One delivery report of librdkafka's (or of a BatchProducer's, for a record)
RecordReport = Callable[[KafkaError | None, Record], None]


class Deliveries:
    """The acknowledgements of one lane's destinations (`source_of`: destination topic -> its source topic)."""

    def __init__(self, ledger: Ledger, metrics: WriterMetrics, source_of: dict[str, str], codec_of: dict[str, str],
                 offset_map: OffsetMap, start_ms: float) -> None:
        self.ledger = ledger
        self.metrics = metrics
        self.source_of = source_of
        self.codec_of = codec_of
        self.offset_map = offset_map
        #: records older than this (epoch ms) were backlog when the engine started: no latency for them
        self.start_ms = start_ms
        #: destination topic -> records acknowledged since start, and since the last flush into the metrics
        self.acked_total = dict.fromkeys(source_of, 0)
        self.acked = dict.fromkeys(source_of, 0)
        #: (destination topic, partition) -> source timestamp (ms) of the last acknowledged record
        self.acked_ts: dict[Partition, int] = {}
        #: statistics emissions of the destinations' producers so far
        self.stats_emissions = 0
        #: destination topic -> records and their bytes produced (the producer's cumulative counts) and the bytes of
        #: the batches produced (summed over emissions): the figures the metrics are given, all as of the last
        #: statistics emission, kept for the offset map's health
        self.records_total = dict.fromkeys(source_of, 0)
        self.record_bytes_total = dict.fromkeys(source_of, 0)
        self.wire_bytes_total = dict.fromkeys(source_of, 0)

    def record_reports(self, only: str | None, failed: OnFailure) -> RecordReport:
        """The delivery callback of one producer; `only`: the one destination topic it writes, if so.

        One call per record and destination: a producer with one destination topic never asks a report for its
        topic (a str decoded and hashed per record), and latency is sampled. The offset map's call is made only
        where there is a map (`OffsetMap.per_record`), chosen here once.
        """
        acked_report = self.ledger.acked
        acked = self.acked
        acked_ts = self.acked_ts
        latency = self.metrics.latency
        backfill = self.metrics.backfill
        start_ms = self.start_ms
        report_failure = self._failure_report(failed)
        mapped = self.offset_map.per_record()
        if mapped is not None:
            return self._mapped_reports(only, report_failure, mapped)

        def delivered(err: KafkaError | None, msg: Record) -> None:
            dest = only or msg.topic()
            partition = msg.partition()
            if err is None:
                acked_report(dest, partition)
                n = acked[dest] = acked[dest] + 1
                ts = msg.timestamp()[1]
                acked_ts[(dest, partition)] = ts
                if not n & 15:  # sampled: an observation costs more than the rest of this callback
                    if ts >= start_ms:
                        latency(dest, max(0.0, time.time() - ts / 1000))
                    else:  # backlog: its age is not the pipeline's latency
                        backfill(dest)
            else:
                report_failure(err, dest, partition, msg)

        return delivered

    def _mapped_reports(self, only: str | None, report_failure: Callable[[KafkaError, str, int, Record], None],
                        mapped: MapAdd) -> RecordReport:
        """`record_reports` where there is an offset map: each acknowledged record is added to it."""
        acked_report = self.ledger.acked
        acked = self.acked
        acked_ts = self.acked_ts
        latency = self.metrics.latency
        backfill = self.metrics.backfill
        start_ms = self.start_ms
        source_of = self.source_of

        def delivered(err: KafkaError | None, msg: Record) -> None:
            dest = only or msg.topic()
            partition = msg.partition()
            if err is None:
                offset = acked_report(dest, partition)
                mapped(source_of[dest], dest, partition, offset, msg.offset())
                n = acked[dest] = acked[dest] + 1
                ts = msg.timestamp()[1]
                acked_ts[(dest, partition)] = ts
                if not n & 15:
                    if ts >= start_ms:
                        latency(dest, max(0.0, time.time() - ts / 1000))
                    else:
                        backfill(dest)
            else:
                report_failure(err, dest, partition, msg)

        return delivered

    def _failure_report(self, failed: OnFailure) -> Callable[[KafkaError, str, int, Record], None]:
        acked_failed = self.ledger.acked_failed
        source_of = self.source_of

        def report(err: KafkaError, dest: str, partition: int, msg: Record) -> None:
            offset, ts = acked_failed(dest, partition)
            if ts is not None and not isinstance(msg, Delivered):
                # librdkafka's failed report carries no timestamp: the record's own, as `write` produced it
                msg = Delivered(dest, partition, -1, (msg.key(), msg.value(), msg.headers() or (), ts, 0))
            failed(Failure((source_of[dest], partition), offset, dest, err.name(), err.str(), msg), err.code())

        return report

    def batch(self, err: KafkaError | None, dest: str, partition: int, base: int, section: Any,
              reported_at: Callable[[str], float], failed: Callable[[Failure], None]) -> None:
        """The report of one batch of the record-sets path: the ledger's runs it covers, the metrics, the offset map;
        or a failure per record (the batch producer split it down first where its size was refused).
        `reported_at(dest)`: when (epoch s) its producer had the report."""
        n = len(section)
        self.ledger.acked_through(dest, partition, section.last_offset, n)
        source = self.source_of[dest]
        if err is not None:
            for i in range(n):
                offset, ts, key, value, headers = section.record(i)
                failed(Failure((source, partition), offset, dest, err.name(), err.str(),
                               Delivered(dest, partition, -1, (key, value, headers, ts, 0))))
            return
        self.acked[dest] += n
        self.acked_ts[(dest, partition)] = section.max_timestamp
        # each record new or backlog by its own timestamp: a batch mixing both is not timed (or left out) whole
        samples, backlog = new_and_backlog(section, n, reported_at(dest) * 1000, self.start_ms)
        for age, weight in samples:
            self.metrics.latency(dest, max(0.0, age / 1000), weight)
        if backlog:  # its age is not the pipeline's latency
            self.metrics.backfill(dest, backlog)
        self.offset_map.add_section(source, dest, partition, section.offsets, base)

    def resent(self, f: Failure, offset: int) -> None:
        """A refused record sent again alone was acknowledged, at `offset` in its destination."""
        self.offset_map.add(f.source[0], f.destination, f.source[1], f.offset, offset)
        self.ledger.release(f.source, f.offset)
        self.acked[f.destination] += 1

    def flush_acked(self) -> None:
        """Acknowledgements since the last call, into the metrics and `acked_total` (not per record)."""
        for dest, n in self.acked.items():
            if n:
                self.metrics.acked(dest, self.codec_of[dest], n)
                self.acked_total[dest] += n
                self.acked[dest] = 0

    def on_producer_stats(self, raw: str) -> None:
        """librdkafka's statistics callback."""
        self.produced(producer_topics(json.loads(raw)))

    def produced(self, topics: dict[str, TopicProduce]) -> None:
        """One statistics emission of a destination producer (librdkafka's, or a BatchProducer's)."""
        self.stats_emissions += 1
        for topic, t in topics.items():
            if topic in self.codec_of:
                self.metrics.produced(topic, self.codec_of[topic], t.batch_bytes, t.batch_records,
                                      t.record_bytes_total)
                self.records_total[topic] = max(self.records_total[topic], t.records_total)
                self.record_bytes_total[topic] = max(self.record_bytes_total[topic], t.record_bytes_total)
                self.wire_bytes_total[topic] += int(t.batch_bytes.total)
