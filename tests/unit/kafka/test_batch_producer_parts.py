"""The batch producer's parts without a broker: sequence numbers, the error vocabulary, the statistics, and the
Produce requests' handler for each outcome of an answer (on fake collaborators: what it reports, sends again,
renews)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import TranscoderError
from transcoder.kafka.producer.batches import Batch, Round
from transcoder.kafka.producer.errors import ProduceError, raises_kafka_exception
from transcoder.kafka.producer.guarantee import Admission, Idempotent
from transcoder.kafka.producer.requests import ProduceRequests
from transcoder.kafka.producer.sequences import ProducerSequences
from transcoder.kafka.producer.statistics import SentBatches
from transcoder.kafka.producer.transaction_state import TransactionManager, TxnEvent
from transcoder.kafka.retries import Backoff, KafkaErrors

TP = ("t", 0)


# ------------------------------------------------------------------ sequences
def test_sequences_per_partition_set_back_and_renewed():
    s = ProducerSequences()
    s.renew(7, 0)
    assert s.take(TP, 10) == 0
    assert s.take(TP, 5) == 10
    assert s.take(("t", 1), 3) == 0
    assert s.peek(TP) == 15
    s.set_back(TP, 10)  # the batch at 10 was not written: the next takes its numbers
    assert s.take(TP, 2) == 10
    assert s.stamp(12) == (7, 0, 12)
    s.renew(7, 1)
    assert s.peek(TP) == 0 and s.peek(("t", 1)) == 0 and (s.producer_id, s.epoch) == (7, 1)


def test_sequences_wrap_at_int32():
    s = ProducerSequences()
    s.set_back(TP, 2**31 - 2)
    assert s.take(TP, 5) == 2**31 - 2
    assert s.peek(TP) == 3


# ------------------------------------------------------------------ errors
def test_a_produce_error_is_a_transcoder_error_with_kafkas_name_and_flags():
    err = ProduceError(10, "t [0]: too large")
    assert isinstance(err, TranscoderError)
    assert err.kafka_error == "MSG_SIZE_TOO_LARGE" and err.code == 10 and not err.retriable
    k = ProduceError(90, "fenced", fatal=True).as_kafka_error()
    assert (k.code(), k.name(), k.fatal(), k.txn_requires_abort(), k.retriable()) == (90, "PRODUCER_FENCED", True,
                                                                                      False, False)
    k = ProduceError(KafkaError._TIMED_OUT, "late", txn_requires_abort=True).as_kafka_error()
    assert k.txn_requires_abort() and not k.fatal() and k.str() == "late"
    assert ProduceError(51, "busy", retriable=True).as_kafka_error().retriable()


def test_a_transaction_call_raises_kafka_exception_with_the_same_flags():
    @raises_kafka_exception
    def call() -> None:
        raise ProduceError(48, "abortable", txn_requires_abort=True)

    with pytest.raises(KafkaException) as info:
        call()
    assert info.value.args[0].code() == 48 and info.value.args[0].txn_requires_abort()


# ------------------------------------------------------------------ statistics
def test_statistics_windows_start_again_and_totals_go_on():
    s = SentBatches()
    s.sent("a", 100, 10, 1000)
    s.sent("a", 300, 30, 3000)
    first = s.emit()
    assert (first["a"].records_total, first["a"].record_bytes_total) == (40, 4000)
    assert first["a"].batch_records.maximum == 30 and first["a"].batch_bytes.total == 400
    second = s.emit()
    assert second["a"].records_total == 40 and second["a"].batch_records.count == 0


# ------------------------------------------------------------------ the Produce requests' handlers
class _Failures:
    def failed(self, event: str, now: float, **fields: Any) -> None:
        pass

    def succeeded(self, event: str, now: float, **key: Any) -> None:
        pass


class _Host:
    """The Produce requests' collaborators in one fake (the raw client, the accumulator, the encoder, the reports
    and, exactly-once, the guarantee): records what the requests ask of each, through their public methods."""

    client_id = "c1"

    def __init__(self, answers: dict, *, txn: TransactionManager | None = None) -> None:
        self.txn = txn
        self.seq = ProducerSequences()
        self.seq.renew(7, 0)
        self.failures = _Failures()
        self.answers = answers
        self.record_errors: dict = {}
        self.reports: list = []
        self.dropped: list = []
        self.split: list = []
        self.unready: list = []
        self.renewed = 0

    # the raw client
    def leaders(self, topics: Any) -> dict:
        return {TP: 1}

    def produce_start(self, payloads: dict, **kwargs: Any) -> str:
        return "call"

    def produce_answers(self, call: str) -> dict:
        return self.answers

    def produce_record_errors(self, call: str) -> dict:
        return self.record_errors

    def init_producer_id(self) -> tuple[int, int, int]:
        self.renewed += 1
        return 0, 8, 0

    # the accumulator
    def put_back(self, b: Batch) -> None:
        self.unready.append(b.tp)

    def split_back(self, b: Batch, pieces: list | None = None) -> None:
        self.split.append(b.tp)
        self.pieces = pieces

    # the encoder
    def stamp_again(self, retry: dict) -> dict:
        return retry

    # the reports
    def finish(self, done: list) -> None:
        self.reports.extend((e.code if e else 0, b.tp, base) for e, b, base in done)

    def sent(self, b: Batch) -> None:
        pass

    # the guarantee, exactly-once (the transaction: guarantee.Guarantee)
    doomed = False
    produce_fields: dict = {}

    def admit(self, batches: dict) -> Admission:
        assert self.txn is not None
        self.txn.added(tps for tps in batches if tps not in self.txn.partitions)
        return Admission()

    def holds(self, tp: tuple[str, int]) -> bool:
        assert self.txn is not None
        return tp in self.txn.partitions

    def abandon(self, batches: list, err: ProduceError) -> bool:
        self.dropped.append((len(batches), err.code, err.txn_requires_abort))
        return True


def _requests(host: _Host, errors: KafkaErrors | None = None) -> ProduceRequests:
    return ProduceRequests(host, client_id="c1", sequences=host.seq, accumulator=host,  # type: ignore[arg-type]
                           encoder=host, reports=host, failures=host.failures,  # type: ignore[arg-type]
                           guarantee=host if host.txn is not None else Idempotent(),
                           request_timeout_ms=1000, delivery_timeout_s=300, backoff=Backoff(10, 10),
                           errors=errors or KafkaErrors())


def _round(host: _Host, records: int = 4) -> tuple[ProduceRequests, Round]:
    sender = _requests(host)
    base = host.seq.take(TP, records)
    batch = Batch(TP, [(b"k", b"v", (), 0, 2)] * records, base, b"payload", time.monotonic(), 2 * records)
    return sender, sender.start({TP: batch})


@pytest.mark.parametrize(("code", "reports", "retried", "split", "renewed", "next_sequence"), [
    (0, [(0, TP, 42)], False, False, 0, 4),  # delivered
    (46, [(0, TP, 42)], False, False, 0, 4),  # DUPLICATE_SEQUENCE_NUMBER: it was written once
    (6, [], True, False, 0, 4),  # NOT_LEADER_OR_FOLLOWER: the same bytes again
    (10, [], False, True, 0, 0),  # too large: the halves go back, with its sequences
    (59, [], True, False, 1, 0),  # UNKNOWN_PRODUCER_ID: sent again under a new producer id
    (43, [(43, TP, -1)], False, False, 0, 0),  # refused for good: reported failed, its sequences reused
    (87, [], False, True, 0, 0),  # INVALID_RECORD, none named: its halves go back, with its sequences
    (32, [], False, True, 0, 0),  # INVALID_TIMESTAMP, likewise
    (45, [(45, TP, -1)], False, False, 1, 0),  # OUT_OF_ORDER_SEQUENCE_NUMBER: reported, a new producer id
])
def test_each_outcome_of_a_produce_answer(code: int, reports: list, retried: bool, split: bool, renewed: int,
                                          next_sequence: int):
    host = _Host({TP: (code, 42)})
    sender, round_ = _round(host)
    retry = sender.finish(round_, {})
    assert host.reports == reports
    assert (TP in retry) is retried
    assert host.split == ([TP] if split else [])
    assert host.renewed == renewed
    assert host.seq.peek(TP) == next_sequence
    assert host.dropped == []


def test_in_a_transaction_a_fenced_or_forgotten_batch_dooms_it_and_is_not_reported():
    for code in (59, 90, 47):
        txn = TransactionManager("tid-1")
        txn.transition(TxnEvent.INIT)
        txn.initialized()
        host = _Host({TP: (code, -1)}, txn=txn)
        sender, round_ = _round(host)
        assert txn.partitions == {TP}  # added before its first batch
        assert sender.finish(round_, {}) == {}
        assert host.reports == [] and host.dropped == [(1, code, True)] and host.renewed == 0


def test_a_batch_sealed_ahead_goes_back_when_its_partitions_batch_was_not_delivered():
    host = _Host({TP: (6, -1)})
    sender, round_ = _round(host)
    ahead = Batch(TP, [(b"k", b"v", (), 0, 2)], host.seq.take(TP, 1), b"p", time.monotonic(), 2)
    sender.finish(round_, {TP: ahead})
    assert host.unready == [TP]


def test_a_batch_past_the_delivery_timeout_is_reported_failed_and_the_producer_id_renewed():
    host = _Host({TP: (6, -1)})
    sender, round_ = _round(host)
    round_.started[1][0][TP].first_sent -= 301
    assert sender.finish(round_, {}) == {}
    assert host.reports == [(KafkaError._MSG_TIMED_OUT, TP, -1)] and host.renewed == 1


def test_a_producer_id_refused_for_now_is_asked_again_after_a_back_off_counted_and_logged():
    from transcoder.kafka.failure_log import FailureLog

    class Loading(_Host):
        def __init__(self) -> None:
            super().__init__({})
            self.failures = FailureLog("c1")  # type: ignore[assignment]
            self.codes = [14, 14]  # COORDINATOR_LOAD_IN_PROGRESS twice, then an id

        def init_producer_id(self) -> tuple[int, int, int]:
            return (self.codes.pop(0), -1, -1) if self.codes else (0, 9, 0)

    import structlog

    host, errors = Loading(), KafkaErrors()
    sender = _requests(host, errors)
    with structlog.testing.capture_logs() as logs:
        sender.renew_producer_id(5)
    assert host.seq.producer_id == 9
    assert errors.counts() == {("COORDINATOR_LOAD_IN_PROGRESS", "", ""): 2}
    assert [(e["event"], e.get("error", e.get("last_error"))) for e in logs if e["event"] != "producer_id"] == [
        ("init_producer_id_failed", "COORDINATOR_LOAD_IN_PROGRESS"),
        ("kafka_requests_succeed_again", "COORDINATOR_LOAD_IN_PROGRESS")]


# ------------------------------------------------------------------ the accumulator
def _accumulator(queue_max_bytes: int = 1 << 20) -> Any:
    import threading

    from transcoder.kafka.producer.accumulator import RecordAccumulator

    return RecordAccumulator(threading.Lock(), client_id="c1", max_bytes=1 << 20, max_records=1000, linger_ms=0,
                             queue_max_bytes=queue_max_bytes)


def test_the_accumulator_counts_records_until_served_and_refuses_when_full_or_closed():
    from transcoder.kafka.producer.accumulator import Pending

    acc = _accumulator(queue_max_bytes=10)
    acc.add(TP, (b"k", b"v", (), 0, 6))
    with pytest.raises(BufferError):
        acc.add(TP, (b"k", b"v", (), 0, 6))
    assert len(acc) == 1
    drained = acc.next_round(Pending(acc.purges), lambda tp, now: 0.0)
    assert drained is not None and drained.taken == {TP: [(b"k", b"v", (), 0, 6)]}
    assert len(acc) == 1  # in flight: counted until its report is served
    acc.served(Batch(TP, drained.taken[TP], 0, b"", 0.0, 6))
    assert len(acc) == 0
    acc.close()
    with pytest.raises(RuntimeError, match="closed"):
        acc.add(TP, (b"k", b"v", (), 0, 1))
    assert acc.next_round(Pending(acc.purges), lambda tp, now: 0.0) is None  # closing: the sender stops

