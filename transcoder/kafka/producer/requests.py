"""The batch producer's Produce requests: one round sends each batch once, one request per leader, all in flight at
once (`start`), then reads the answers (`finish`), one handler per outcome of a partition's answer (delivered, sent
again, split, producer id renewed, refused), and gives up on batches past the delivery timeout. A batch refused for
some of its records (INVALID_TIMESTAMP, INVALID_RECORD) is cut until each of those is alone, the pieces sent again in
order: the valid records are written, in their order, and only a record refused alone is reported failed. It also
takes the idempotent producer's id (InitProducerId, `renew_producer_id`): at the start, and whenever a batch's
outcome is unknown.

Shaped after aiokafka's `producer/sender.py` (a handler per request and answer). Its collaborators are handed in:
the Produce requests' connection, the accumulator (batches handed back: put back, split), the encoder (batches
stamped again under a new producer id), the sequences, the reports (delivered, refused) and the guarantee
(exactly-once: the transaction, which adds partitions and takes the batches it cannot have). It owns where each
partition's leader is and how the last rounds went; the sender's loop (sender.py) drives it.

A batch sent again waits its partition's back-off first, as Kafka's producer waits (KIP-580): retry.backoff.ms
doubling to retry.backoff.max.ms while the partition keeps failing, +-20%, back to the start once one of its
batches is delivered; the other partitions' batches go meanwhile. Each retriable error is counted by Kafka's name
(transcoder_kafka_errors_total) and logged with topic, partition, broker and name, at most once per 30 s per
partition and error (FailureLog).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.producer.accumulator import RecordAccumulator
from transcoder.kafka.producer.batches import Batch, Partition, Report, Round, isolate, record_halves
from transcoder.kafka.producer.encoder import BatchEncoder
from transcoder.kafka.producer.errors import (
    INVALID_TIMESTAMP,
    MSG_TIMED_OUT,
    NETWORK_EXCEPTION,
    RECORD_REFUSALS,
    NoAnswer,
    NotSent,
    ProduceError,
    error_name,
    error_text,
    is_invalid_metadata,
    is_retriable,
)
from transcoder.kafka.producer.guarantee import Guarantee
from transcoder.kafka.producer.reports import DeliveryReports
from transcoder.kafka.producer.sequences import ProducerSequences
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.retries import KAFKA_ERRORS, Backoff, KafkaErrors, kafka_error_name
from transcoder.pipeline import batching
from transcoder.pipeline.batching import PRODUCER_FENCED, Outcome


@dataclass
class Answers:
    """What one round's answers settled: the reports to queue, the batches to send again, and whether the
    producer id must be renewed first (the broker forgot it, or a batch's outcome is unknown)."""

    retry: dict[Partition, Batch]
    done: list[Report] = field(default_factory=list)
    renew: bool = False


class ProduceRequests:
    """The Produce requests of one producer: where each partition's leader is, each partition's back-off, and a
    handler per outcome of an answer; the producer id (`renew_producer_id`)."""

    def __init__(self, client: RawClient, *, client_id: str, sequences: ProducerSequences,
                 accumulator: RecordAccumulator, encoder: BatchEncoder, reports: DeliveryReports,
                 failures: FailureLog, guarantee: Guarantee, request_timeout_ms: int,
                 delivery_timeout_s: float, backoff: Backoff, errors: KafkaErrors | None = None) -> None:
        #: the Produce requests' connection
        self.client, self.client_id = client, client_id
        self._seq, self._acc, self._encoder, self._reports = sequences, accumulator, encoder, reports
        self._failures, self._guarantee = failures, guarantee
        #: per partition (a batch sent again), "metadata" (the leaders' lookup) and "producer_id" (InitProducerId)
        self.backoff = backoff
        self._errors = KAFKA_ERRORS if errors is None else errors
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout = delivery_timeout_s
        self.leaders: dict[Partition, int] = {}
        #: this round's AddPartitionsToTxn was answered "busy" (the last transaction's markers being written): the
        #: round is retried after TXN_RETRY_BACKOFF_S, as the Java producer retries it after 20 ms, not after the
        #: back-off for failures (which doubles while rounds fail: 200, 400, 800 ms ... at a transaction's start)
        self.coordinator_busy = False

    @property
    def _log(self) -> Any:
        return structlog.get_logger("transcoder.batchproducer")  # looked up at use: the configuration of then

    # ------------------------------------------------------------------ the requests
    def start(self, batches: dict[Partition, Batch]) -> Round:
        """Send each batch once, one Produce request per leader, all in flight at once; `finish` reads the
        answers. In a transaction, partitions are added to it first (those not added wait for the next round)."""
        guarantee = self._guarantee
        now = time.monotonic()
        self._look_up_leaders({tp[0] for tp in batches if self.leaders.get(tp, -1) < 0}, now)
        by_leader: dict[int, dict[Partition, Batch]] = {}
        retry: dict[Partition, Batch] = {}
        admission = guarantee.admit(batches)
        self.coordinator_busy = admission.busy
        if admission.lost:  # the transaction is lost: nothing more of it is sent
            return Round({}, {})
        for tp, b in batches.items():
            leader = self.leaders.get(tp, -1)
            if leader < 0:  # not known yet: asked again after the back-off
                self.backoff.failed(tp, now)
                retry[tp] = b
            elif not guarantee.holds(tp):  # not added to the transaction yet
                if not self.coordinator_busy:  # busy: asked again after TXN_RETRY_BACKOFF_S (the sender's loop)
                    self.backoff.failed(tp, now)
                retry[tp] = b
            else:
                by_leader.setdefault(leader, {})[tp] = b
        started: dict[int, tuple[dict[Partition, Batch], Any]] = {}
        fields = guarantee.produce_fields
        for leader, group in by_leader.items():
            try:
                call: Any = self.client.produce_start({tp: b.payload for tp, b in group.items()}, leader=leader,
                                                      timeout_ms=self._request_timeout_ms, **fields)
            except NoAnswer as exc:  # not sent: read as an unanswered request
                call = exc
            started[leader] = (group, call)
        return Round(started, retry)

    def _look_up_leaders(self, missing: set[str], now: float) -> None:
        """The leaders of `missing` topics' partitions, once the metadata's back-off allows."""
        if not missing or not self.backoff.ready("metadata", now):
            return
        try:
            self.leaders.update(self.client.leaders(missing))
            self.backoff.succeeded("metadata")
            self._failures.succeeded("metadata_request_failed", now)
        except NoAnswer as exc:
            self.backoff.failed("metadata", now)
            name = kafka_error_name(exc)
            for topic in sorted(missing):
                self._errors.count(name, topic=topic, now=now)
            self._failures.failed("metadata_request_failed", now, error=name,
                                  topics=",".join(sorted(missing)), detail=repr(exc))

    def finish(self, round_: Round, ahead: dict[Partition, Batch]) -> dict[Partition, Batch]:
        """The answers to `start`'s requests (waiting for them): reports for the batches delivered or refused for
        good; return those to send again. A batch sealed `ahead` whose partition's batch in this round was not
        delivered goes back to be sealed again (`_unready`)."""
        answers = Answers(round_.retry)
        for leader, (group, call) in round_.started.items():
            per_partition = self._answers_of(leader, group, call, answers)
            if per_partition is None:
                continue
            refused = self.client.produce_record_errors(call) if any(
                code in RECORD_REFUSALS for code, _ in per_partition.values()) else {}
            for tp, b in group.items():
                code, base_offset = per_partition.get(tp, (NETWORK_EXCEPTION, -1))  # no answer for it
                self._on_answer(b, code, base_offset, ahead, answers, leader, refused.get(tp, ()))
        self._expire(answers)
        self._reports.finish(answers.done)
        retry = answers.retry
        for tp in [tp for tp in ahead if tp in retry or answers.renew]:  # sealed under a sequence or id that changes
            self._unready(ahead.pop(tp))
        if answers.renew:
            self.renew_producer_id(self._request_timeout_ms / 1000)
            retry = self._encoder.stamp_again(retry)
        return retry

    def _answers_of(self, leader: int, group: dict[Partition, Batch], call: Any,
                    answers: Answers) -> dict[Partition, tuple[int, int]] | None:
        """One leader's answer: (code, base offset) per partition; None when there was none (the outcome is
        unknown: the same bytes go again)."""
        try:
            if isinstance(call, NoAnswer):
                raise call
            got = self.client.produce_answers(call)
        except NoAnswer as exc:
            now = time.monotonic()
            name = kafka_error_name(exc)
            topics: dict[str, list[int]] = {}
            for tp in group:
                self.backoff.failed(tp, now)
                topics.setdefault(tp[0], []).append(tp[1])
            for topic, ps in topics.items():
                self._errors.count(name, topic=topic, broker=leader, partitions=ps, now=now)
            self._failures.failed("produce_request_failed", now, key=(leader,), broker=leader, error=name,
                               partitions="; ".join(f"{t} [{','.join(map(str, sorted(ps)))}]"
                                                    for t, ps in sorted(topics.items())),
                               detail=repr(exc))
            if not isinstance(exc, NotSent):
                # NodeNotReady: not sent, the connection is paused (the broker throttles this client: a quota)
                # or backing off. The leader stands; asking the metadata again would fail alike (the only
                # broker's connection is the paused one) and hold the batches longer.
                for tp in group:
                    self.leaders.pop(tp, None)
            answers.retry.update(group)
            return None
        self._failures.succeeded("produce_request_failed", time.monotonic(), key=(leader,))
        return got

    def renew_producer_id(self, timeout: float) -> None:
        """InitProducerId (idempotent): a (new) producer id; sequences start again at 0. KafkaUnavailableError when
        Kafka refuses it for good, or gives none within `timeout`."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            name = ""
            try:
                code, pid, epoch = self.client.init_producer_id()
            except NoAnswer as exc:  # connected, but no answer (KafkaUnavailableError: cannot connect at all)
                code, pid, epoch, last, name = -1, -1, -1, repr(exc), kafka_error_name(exc)
            if code == 0:
                self.backoff.succeeded("producer_id")
                self._failures.succeeded("init_producer_id_failed", time.monotonic())
                self._seq.renew(pid, epoch)
                self._log.info("producer_id", client_id=self.client_id, producer_id=pid, epoch=epoch)
                return
            if code > 0:
                last = f"InitProducerId error {error_name(code)}"
                if not is_retriable(code):
                    raise KafkaUnavailableError(f"producer {self.client_id}: {last}",
                                                kafka_error=error_name(code), retriable=False)
            if name or is_retriable(code):  # retried: counted and logged (at most once per 30 s)
                name = name or kafka_error_name(code)
                self._errors.count(name)
                self._failures.failed("init_producer_id_failed", time.monotonic(), error=name, detail=last)
            if time.monotonic() >= deadline:
                self.backoff.succeeded("producer_id")
                raise KafkaUnavailableError(f"producer {self.client_id}: cannot get a producer id: {last}")
            time.sleep(min(self.backoff.failed("producer_id", time.monotonic()),
                           max(0.0, deadline - time.monotonic())))

    # ------------------------------------------------------------------ one handler per outcome
    def _on_answer(self, b: Batch, code: int, base_offset: int, ahead: dict[Partition, Batch],
                   answers: Answers, leader: int, refused: tuple[int, ...] = ()) -> None:
        """`refused`: the records the answer names as refused (record_errors), by index in the batch."""
        if code in RECORD_REFUSALS and b.count > 1:  # refused for some of its records: cut until they are alone
            what = Outcome.SPLIT
        else:
            what = batching.outcome(code, b.count, is_retriable(code))
        if what is not Outcome.DELIVERED and b.tp in ahead:  # before its own sequence is set back (below)
            self._unready(ahead.pop(b.tp))
        if what is Outcome.DELIVERED:
            self._delivered(b, base_offset, answers)
        elif what is Outcome.RETRY:
            self._send_again(b, code, answers, leader)
        elif what is Outcome.RENEW:
            self._renew(b, code, answers)
        elif what is Outcome.SPLIT:
            self._split(b, code, refused)
        else:
            self._refused(b, code, answers)

    def _delivered(self, b: Batch, base_offset: int, answers: Answers) -> None:
        answers.done.append((None, b, base_offset))
        self.backoff.succeeded(b.tp)
        self._failures.succeeded("produce_partition_failed", time.monotonic(), key=b.tp)
        self._reports.sent(b)

    def _send_again(self, b: Batch, code: int, answers: Answers, leader: int) -> None:
        """Retriable: the same bytes again (same producer id and sequence: never written twice), after the
        partition's back-off; counted and logged with the partition, the broker and Kafka's error name."""
        now = time.monotonic()
        answers.retry[b.tp] = b
        self.backoff.failed(b.tp, now)
        name = kafka_error_name(code)
        topic, partition = b.tp
        self._errors.count(name, topic=topic, broker=leader, partitions=[partition], now=now)
        self._failures.failed("produce_partition_failed", now, key=(topic, partition, name), topic=topic,
                                    partition=partition, broker=leader, error=name, records=b.count)
        if is_invalid_metadata(code):  # the partition's leader must be looked up again
            self.leaders.pop(b.tp, None)

    def _unready(self, b: Batch) -> None:
        """A batch sealed ahead goes back to its partition's queue, to be sealed again (its sequence or the producer
        id may change): the next batch of its partition takes its sequences."""
        self._acc.put_back(b)
        self._seq.set_back(b.tp, b.base_sequence)

    def wait(self, tp: Partition, now: float) -> float:
        """Seconds until a batch of `tp` may be sent again (0: now)."""
        return self.backoff.wait(tp, now)

    def _renew(self, b: Batch, code: int, answers: Answers) -> None:
        """The broker forgot the producer id: idempotent, sent again under a new one; in a transaction, it is lost
        with the transaction."""
        if not self._guarantee.abandon([b], _abortable(b.tp, code)):
            answers.retry[b.tp] = b
            answers.renew = True

    def _split(self, b: Batch, code: int, refused: tuple[int, ...] = ()) -> None:
        """Too large for the topic: its halves go back to be sealed as batches of their own. Refused for some of its
        records (RECORD_REFUSALS; `refused`: their indexes, when the answer names them): cut until each of those is
        alone (batches.isolate), the pieces go back in order; one refused alone is reported (`_refused`)."""
        self._seq.set_back(b.tp, b.base_sequence)  # not written: its sequences go to the pieces
        if code not in RECORD_REFUSALS:
            self._acc.split_back(b)
            self._log.info("batch_split", client_id=self.client_id, topic=b.tp[0], partition=b.tp[1],
                           records=b.count, bytes=len(b.payload))
            return
        if b.section is not None:
            pieces: list[Any] = isolate(b.section, b.count, refused, lambda s: s.split())
        else:
            assert b.records is not None
            pieces = isolate(b.records, b.count, refused, record_halves)
        self._acc.split_back(b, pieces)
        self._log.info("batch_refused_for_some_records", client_id=self.client_id, topic=b.tp[0],
                       partition=b.tp[1], records=b.count, error=error_name(code),
                       refused=list(refused) or "not named (cut in halves)", pieces=len(pieces),
                       note="sent again in order; only a record refused alone fails")

    def _refused(self, b: Batch, code: int, answers: Answers) -> None:
        """Refused for good. In a transaction, fenced or ended by the coordinator: the transaction is lost (the
        abort's epoch bump tells which). Otherwise reported failed; the next batch takes its sequences."""
        tp = b.tp
        if code in batching.SEQUENCE_BROKEN_CODES | {PRODUCER_FENCED} and self._guarantee.abandon(
                [b], _abortable(tp, code)):
            return
        self._seq.set_back(tp, b.base_sequence)
        answers.renew = answers.renew or code in batching.SEQUENCE_BROKEN_CODES
        what = (f"the broker refused a batch of {b.count} records ({len(b.payload)} bytes)" if b.count > 1 else
                f"the broker refused this record, sent alone ({len(b.payload)} bytes)")
        if code == INVALID_TIMESTAMP:
            what += (": its timestamp is outside the destination's message.timestamp.before.max.ms / "
                     "message.timestamp.after.max.ms of the broker's clock")
        answers.done.append((ProduceError(code, f"{tp[0]} [{tp[1]}]: {error_text(code)}: {what}"), b, -1))

    def _expire(self, answers: Answers) -> None:
        """Batches past the delivery timeout: failed (the last attempt's outcome is unknown, so the producer id is
        renewed: its sequences are never reused); in a transaction, the transaction is lost with them."""
        now = time.monotonic()
        for tp, b in list(answers.retry.items()):
            if now - b.first_sent <= self._delivery_timeout:
                continue
            del answers.retry[tp]
            why = f"{tp[0]} [{tp[1]}]: not acknowledged within {self._delivery_timeout:.0f} s"
            if not self._guarantee.abandon([b], ProduceError(MSG_TIMED_OUT, why, txn_requires_abort=True)):
                answers.renew = True
                answers.done.append((ProduceError(MSG_TIMED_OUT, why), b, -1))


def _abortable(tp: Partition, code: int) -> ProduceError:
    return ProduceError(code, f"{tp[0]} [{tp[1]}]: {error_text(code)}", txn_requires_abort=True)
