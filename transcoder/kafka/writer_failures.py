"""What a writer (transcoder.kafka.writer.Writer) does with the records a destination did not take: the records of
a batch the broker refused whole are sent again, each alone (`RefusedRecords`), and a record that failed for good is
copied to the dead-letter topic (`DeadLetters`, errors.tolerance=all) or stops the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

import structlog
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Message, Producer

from transcoder.errors import DeliveryError
from transcoder.kafka.producer import Delivered
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition
from transcoder.pipeline.routes import Target

log = structlog.get_logger("transcoder.writer")  # the writer's events, under its name

#: Headers a dead-letter record carries, after its own (named like Kafka Connect's __connect.errors.*).
DLQ_HEADERS = ("__transcoder.errors.topic", "__transcoder.errors.partition", "__transcoder.errors.offset",
               "__transcoder.errors.destination", "__transcoder.errors.reason")

#: Errors with which a broker refuses a whole batch for what may be one record in it (a record over the
#: topic's max.message.bytes, a null key on a compacted topic, a timestamp outside the topic's
#: message.timestamp.before/after.max.ms). librdkafka reports every record of the batch failed (where the broker
#: names the records at fault, KIP-467, the others with _INVALID_DIFFERENT_RECORD); as Kafka's Java producer
#: splits such a batch, the writer sends each record again alone, and only a record refused alone is at fault.
BATCH_REFUSALS = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE,
                            KafkaError.INVALID_RECORD, KafkaError.INVALID_TIMESTAMP,
                            KafkaError._INVALID_DIFFERENT_RECORD})

Record = Message | Delivered


@dataclass(frozen=True)
class Failure:
    """A source record one destination did not take."""

    source: Partition
    offset: int
    destination: str
    code: str  # Kafka's error name, e.g. MSG_SIZE_TOO_LARGE: the metrics label
    reason: str
    message: Record | None  # the record as produced: re-sent alone, or copied to the DLQ

    @property
    def where(self) -> str:
        return f"{self.source[0]} [{self.source[1]}] offset {self.offset}"


class RefusedRecords:
    """The records of batches a broker refused (BATCH_REFUSALS), sent again alone: only a record refused alone
    has failed. Each target gets a producer like its own that sends every record as a batch of its own (`make`).

    A record sent again and acknowledged goes to `acked(failure, offset in the destination)`; one refused again,
    with Kafka's error, to `failed`.
    """

    def __init__(self, lane: str, target_of: Mapping[str, Target], make: Callable[[Target], Producer],
                 acked: Callable[[Failure, int], None], failed: Callable[[Failure], None]) -> None:
        self.lane = lane
        self.target_of = target_of  # destination topic -> its target
        self._make = make
        self._acked = acked
        self._failed = failed
        #: records waiting to be sent again, in order
        self.waiting: list[Failure] = []
        #: target name -> the producer that sends its records alone
        self.producers: dict[str, Producer] = {}

    def producer(self, target: Target) -> Producer:
        """The producer that sends `target`'s records alone, made at first use."""
        p = self.producers.get(target.name)
        if p is None:
            p = self.producers[target.name] = self._make(target)
        return p

    def resend(self) -> None:
        """Send each waiting record again, alone. They land after records produced meanwhile."""
        if not self.waiting:
            return
        refused, self.waiting = self.waiting, []
        log.warning("batch_refused_records_resent_alone", writer=self.lane, records=len(refused),
                    destinations=sorted({f.destination for f in refused}), reason=refused[0].reason,
                    note="they land after records produced meanwhile")
        for i, f in enumerate(refused):
            m = f.message
            assert m is not None
            ts_type, ts = m.timestamp()
            try:
                self.producer(self.target_of[f.destination]).produce(
                    f.destination, m.value(), m.key(), m.partition(),
                    timestamp=ts if ts_type != TIMESTAMP_NOT_AVAILABLE else 0, headers=m.headers(),
                    on_delivery=partial(self._delivered, f))
            except BufferError:  # its local queue is full: the rest go at the next poll, in order
                self.waiting[:0] = refused[i:]
                return
            except KafkaException as exc:
                self._failed(replace(f, code=exc.args[0].name(), reason=exc.args[0].str()))

    def _delivered(self, f: Failure, err: KafkaError | None, m: Message) -> None:
        if err is None:
            self._acked(f, m.offset())
        else:
            self._failed(replace(f, code=err.name(), reason=err.str()))


class DeadLetters:
    """The dead-letter topic of one lane (errors.tolerance=all) and its producer.

    A failed record is copied there with its key, value and timestamp, its own headers then DLQ_HEADERS (where it
    came from, the destination it failed for, and why). Once the copy is acknowledged the record's ledger entry is
    released (its source offset can be committed); a copy that fails leaves the record in neither its destination
    nor the DLQ: `fatal` says so (the first such record), and the engine stops without committing past it. A copy
    that failed only because another record of its batch was refused (_INVALID_DIFFERENT_RECORD) is sent again:
    `fatal` names a record the DLQ refused, never one of its innocent neighbours.
    """

    def __init__(self, producer: Producer, topic: str | None, lane: str, ledger: Ledger,
                 counted: Callable[[], None]) -> None:
        self.producer = producer
        self.topic = topic  # errors.dlq_topic
        self.lane = lane
        self.ledger = ledger
        self._counted = counted  # the metrics' dead_lettered
        #: records acknowledged by the DLQ
        self.count = 0
        #: a record in neither its destination nor the DLQ: the engine must stop
        self.fatal: DeliveryError | None = None

    def send(self, f: Failure) -> None:
        """Copy the record of failure `f` to the dead-letter topic."""
        self._produce(f)
        log.warning("record_dead_lettered", lane=self.lane, record=f.where, destination=f.destination,
                    reason=f.reason, dlq_topic=self.topic)

    def _produce(self, f: Failure) -> None:
        assert self.topic
        dlq_topic = self.topic
        msg = f.message
        headers = list(msg.headers() or []) if msg is not None else []
        headers += list(zip(DLQ_HEADERS, (f.source[0].encode(), str(f.source[1]).encode(), str(f.offset).encode(),
                                          f.destination.encode(), f.reason.encode()), strict=True))
        ts_type, ts = msg.timestamp() if msg is not None else (TIMESTAMP_NOT_AVAILABLE, 0)

        def delivered(err: KafkaError | None, _m: Message) -> None:
            if err is not None:
                if err.code() == KafkaError._INVALID_DIFFERENT_RECORD:
                    if self.fatal is None:  # innocent: another record of its batch was refused; sent again
                        self._produce(f)
                elif self.fatal is None:
                    # The record is in neither its destination nor the DLQ: stop, and never commit past it.
                    self.fatal = DeliveryError(
                        f"lane {self.lane}: record {f.where} failed for {f.destination} ({f.reason}) and could not "
                        f"be written to the DLQ {dlq_topic}: {err.str()}",
                        topic=f.source[0], partition=f.source[1], offset=f.offset, kafka_error=err.name())
                return
            self.ledger.release(f.source, f.offset)
            self.count += 1
            self._counted()

        self.producer.produce(dlq_topic, msg.value() if msg else None, msg.key() if msg else None,
                              timestamp=ts if ts_type != TIMESTAMP_NOT_AVAILABLE else 0, headers=headers,
                              on_delivery=delivered)
