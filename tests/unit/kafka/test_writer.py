"""transcoder.kafka.writer's sinks without a broker: librdkafka producers only queue locally here (nothing is sent)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, Producer, TopicPartition

from transcoder import config as cfg
from transcoder.errors import TranscoderError
from transcoder.kafka.writer import Sink, build_sink
from transcoder.kafka.writer.producers import ClientFactory
from transcoder.kafka.writer.records import RecordsSink, TransactionalRecordsSink
from transcoder.pipeline.routes import plan


class Msg:
    """The accessors of confluent_kafka.Message the writer reads."""

    def __init__(self, topic: str, partition: int, offset: int, value: bytes | None = b"v", *,
                 error: KafkaError | None = None) -> None:
        self._t, self._p, self._o, self._v, self._e = topic, partition, offset, value, error

    def error(self): return self._e
    def topic(self): return self._t
    def partition(self): return self._p
    def offset(self): return self._o
    def key(self): return b"k"
    def value(self): return self._v
    def headers(self): return [("h", b"12")]
    def timestamp(self): return (TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + self._o)


class Metrics:
    def __getattr__(self, name):
        return lambda *a, **k: None


def writer(*codecs: str, batched: bool = False, guarantee: str = "at-least-once",
           create: ClientFactory = lambda part, make, start: make()) -> Sink:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"}, "guarantee": guarantee,
                      "routes": [{"source": "s", "destinations": [{"codec": c} for c in codecs]}]}, environ={})
    spec = plan(conf, ["s"]).lanes
    targets = tuple(t for lane in spec for t in lane.targets)
    return build_sink(conf, "l", targets, Metrics(), create=create, batched=batched)


def records_writer(*codecs: str) -> RecordsSink:
    w = writer(*codecs)
    assert isinstance(w, RecordsSink)
    return w


def txn_writer(codec: str, create: ClientFactory = lambda part, make, start: make()) -> TransactionalRecordsSink:
    """exactly-once on the records path: librdkafka's transactional producer (made by begin_transactions)."""
    w = writer(codec, guarantee="exactly-once", create=create)
    assert isinstance(w, TransactionalRecordsSink)
    return w


def test_write_tells_the_ledger_every_record_to_every_destination():
    w = writer("lz4", "zstd")
    n, nbytes = w.write([Msg("s", 0, 5), Msg("s", 1, 9), Msg("s", 0, 6)], on_error=lambda e: None)
    size = len(b"k") + len(b"v") + len(b"h") + len(b"12")
    assert (n, nbytes) == (3, 3 * size)
    ts = 1_700_000_000_000  # each entry keeps its record's timestamp (a failed report of librdkafka's has none)
    assert {k: list(q) for k, q in w.ledger.pending.items()} == {
        ("s.lz4", 0): [(5, size, ts + 5), (6, size, ts + 6)], ("s.zstd", 0): [(5, size, ts + 5), (6, size, ts + 6)],
        ("s.lz4", 1): [(9, size, ts + 9)], ("s.zstd", 1): [(9, size, ts + 9)]}
    assert w.ledger.in_flight_bytes == 6 * size
    assert w.ledger.next_offset == {("s", 0): 7, ("s", 1): 10}
    assert w.ledger.committable(("s", 0)) == 5  # nothing acknowledged yet


def test_the_last_statistics_of_transcoders_own_producers_are_taken_at_once_not_waited_for(monkeypatch):
    # Every run (and every Spark task) ends with one more emission per producer; a batch producer's is
    # asked for, not waited on for a statistics interval (5 s by default, paid by every one-shot copy).
    w = writer("lz4", "zstd", batched=True)
    monkeypatch.setattr(w, "poll", lambda timeout: pytest.fail("waited for an emission it could ask for"))
    w.final_statistics()
    assert w.stats_emissions == 2


def test_records_produced_before_a_consumer_error_are_in_the_ledger():
    w = writer("lz4")

    def fail(err: KafkaError) -> None:
        raise TranscoderError(err.str())

    broken = Msg("s", 0, 2, error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    with pytest.raises(TranscoderError):
        w.write([Msg("s", 0, 0), Msg("s", 0, 1), broken, Msg("s", 0, 3)], on_error=fail)
    # their delivery reports will pop these entries: they must be there
    assert [off for off, *_ in w.ledger.pending[("s.lz4", 0)]] == [0, 1]
    assert w.ledger.next_offset == {("s", 0): 2}


def test_write_columns_tells_the_ledger_as_write_does():
    w = records_writer("lz4", "zstd")
    offsets, sizes = [5, 6, 8], [3, 4, 5]
    w.records.write_columns("s", 1, offsets, [b"k", None, b""], [b"v", None, b"vv"], [None, [("h", None)], None],
                      [1, 2, 3], sizes, record_at=lambda i: Msg("s", 1, offsets[i]))
    assert {k: list(q) for k, q in w.ledger.pending.items()} == {
        ("s.lz4", 1): [(5, 3, 1), (6, 4, 2), (8, 5, 3)], ("s.zstd", 1): [(5, 3, 1), (6, 4, 2), (8, 5, 3)]}
    assert w.ledger.in_flight_bytes == 2 * 12
    assert w.ledger.next_offset == {("s", 1): 9}


def test_write_columns_registers_each_record_before_waiting_on_a_full_queue(monkeypatch):
    w = records_writer("lz4", "zstd")
    calls = {"n": 0}
    lz4, zstd = (p for p, _ in w.records.routes["s"])

    def full_once(*a, **k):  # the zstd producer's queue is full at the second record, once
        calls["n"] += 1
        if calls["n"] == 2:
            raise BufferError("Local: Queue full")
        return zstd(*a, **k)

    seen = []
    monkeypatch.setattr(w.records, "poll",
                        lambda timeout: seen.append({k: [o for o, *_ in q] for k, q in w.ledger.pending.items()}))
    w.records.routes["s"] = [(lz4, "s.lz4"), (full_once, "s.zstd")]
    w.records.write_columns("s", 0, [0, 1, 2], [None] * 3, [b"a", b"b", b"c"], [None] * 3, [0, 0, 0], [1, 1, 1],
                      record_at=lambda i: Msg("s", 0, i))
    # while waiting, lz4 had produced records 0 and 1 and zstd record 0: exactly those are registered
    assert seen == [{("s.lz4", 0): [0, 1], ("s.zstd", 0): [0]}]
    assert {k: [o for o, *_ in q] for k, q in w.ledger.pending.items()} == {("s.lz4", 0): [0, 1, 2],
                                                                           ("s.zstd", 0): [0, 1, 2]}


def test_a_fenced_producer_raising_from_its_callbacks_is_named_fenced_before_the_error_callback_runs():
    # flush of a fenced transactional producer raises the fatal error from a delivery callback; the producer's
    # error callback (served later) has not recorded it yet: the lane still says why it stops, in one line.
    w = txn_writer("lz4")
    w.transactional_id = "transcoder-g-0123"
    fenced = KafkaError(KafkaError._FENCED, "ProduceRequest failed: transactional producer fenced", fatal=True)

    def flush(timeout: float) -> int:
        raise KafkaException(fenced)

    with pytest.raises(TranscoderError, match="another instance took over transactional.id transcoder-g-0123"):
        w._txn_call(flush, 1.0)

    def flush_system_error(timeout: float) -> int:  # raised while a report's object was being made
        try:
            raise KafkaException(fenced)
        except KafkaException as exc:
            raise SystemError("<class 'Failure'> returned a result with an exception set") from exc

    with pytest.raises(TranscoderError, match="another instance took over transactional.id transcoder-g-0123"):
        w._txn_call(flush_system_error, 1.0)


class _UnreachableCoordinator:
    """A transactional producer whose commit times out (retriable, the coordinator unreachable) until `until`."""

    def __init__(self, until: float) -> None:
        self.until, self.commits, self.begun = until, 0, 0

    def flush(self, timeout: float) -> int:
        return 0

    def send_offsets_to_transaction(self, offsets, group, timeout: float) -> None:
        pass

    def commit_transaction(self, timeout: float) -> None:
        import time

        self.commits += 1
        if time.monotonic() < self.until:
            time.sleep(0.05)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "EndTxn: 111 ECONNREFUSED", retriable=True))

    def begin_transaction(self) -> None:
        self.begun += 1


def test_a_commit_the_coordinator_cannot_answer_is_asked_again_past_the_stop_timeout(fresh_structlog, monkeypatch):
    # The broker SIGKILLed during a commit and back after 12 s: the commit's EndTxn timed out for longer than
    # shutdown_timeout_s, and the lane failed ("could not commit a transaction"). A commit whose EndTxn may have been
    # sent cannot be aborted instead: it is asked again while the broker could still settle the transaction itself.
    import time

    import structlog

    from transcoder.kafka.writer import factory as writer_module

    monkeypatch.setattr(writer_module, "log", structlog.get_logger("transcoder.writer"))
    w = txn_writer("lz4")
    w.transactional_id = "transcoder-g-0123"
    fake = _UnreachableCoordinator(until=time.monotonic() + 0.6)
    w.producer = fake  # type: ignore[assignment]
    said: list[str] = []
    with structlog.testing.capture_logs() as logs:
        w.commit_transaction([], None, timeout=0.2, retrying=said.append)
    # logged once and once when it goes through, not per retry (every 2 s for a minute's outage)
    assert [e["event"] for e in logs] == ["transaction_commit_retried", "kafka_requests_succeed_again"], logs
    assert fake.commits > 3 and fake.begun == 1
    # each retry is told to the lane (its readiness: waiting on Kafka, not stuck), with Kafka's reason
    assert len(said) == fake.commits - 1 and all("committing a transaction: EndTxn: 111 ECONNREFUSED" in x
                                                 for x in said), said


class TxnProducer:
    """The transactional calls of a producer (librdkafka's or transcoder's): each error given is raised once."""

    def __init__(self, *, send: KafkaError | None = None, abort: KafkaError | None = None,
                 commit: KafkaError | None = None) -> None:
        self.send, self.abort, self.commit = send, abort, commit
        self.calls: list[object] = []

    def send_offsets_to_transaction(self, offsets, group, timeout):
        self.calls.append(("send_offsets", [(o.topic, o.partition, o.offset) for o in offsets], group))
        if self.send is not None:
            raise KafkaException(self.send)

    def abort_transaction(self, timeout):
        self.calls.append("abort")
        if self.abort is not None:
            raise KafkaException(self.abort)

    def commit_transaction(self, timeout):
        self.calls.append("commit")
        if self.commit is not None:
            raise KafkaException(self.commit)

    def begin_transaction(self):
        self.calls.append("begin")

    def init_transactions(self, timeout):
        self.calls.append("init")

    def produce(self, topic, *args, **kwargs):
        self.calls.append(("produce", topic))

    def flush(self, timeout=None):
        return 0

    def poll(self, timeout=0):
        return 0


def released(producer: TxnProducer, known: dict[tuple[str, int], int] | None = None,
             made: list[TxnProducer] | None = None) -> str | None:
    """`producer`'s release of the group's offsets; the producers the sink made after it are added to `made`."""
    made = [] if made is None else made

    def create(part, make, start):
        made.append(TxnProducer())
        return made[-1]

    w = txn_writer("zstd", create=create)
    w.producer, w.transactional_id = producer, "transcoder-g-0123"  # type: ignore[assignment]
    return w.release_group_offsets([TopicPartition("s", 0), TopicPartition("s", 1)], "group-metadata", 1.0, known)


def test_releasing_with_the_offsets_this_process_committed_commits_them():
    # the commit marker ends the pending offsets of a transaction whose own marker the broker lost: as committed
    p, made = TxnProducer(), []
    assert released(p, {("s", 0): 4, ("s", 1): 103}, made) is None
    assert p.calls == [("send_offsets", [("s", 0, 4), ("s", 1, 103)], "group-metadata"), "commit", "begin"]
    assert made == []  # a commit: the same producer begins the next transaction


def test_a_release_commit_kafka_makes_abort_is_aborted_and_asked_again():
    p, made = TxnProducer(commit=KafkaError(KafkaError._TIMED_OUT, "not committed", txn_requires_abort=True)), []
    why = released(p, {("s", 0): 4, ("s", 1): 103}, made)
    assert why == "committing the group's offsets: not committed"
    assert p.calls[1:] == ["commit", "abort"]
    assert [m.calls for m in made] == [["init", "begin"]]  # after an abort: a new producer, a new epoch


def test_releasing_the_group_offsets_adds_them_at_0_and_aborts():
    p, made = TxnProducer(), []
    assert released(p, made=made) is None
    assert p.calls == [("send_offsets", [("s", 0, 0), ("s", 1, 0)], "group-metadata"), "abort"]
    assert [m.calls for m in made] == [["init", "begin"]]


def test_group_offsets_not_added_are_aborted_and_reported_not_released():
    p, made = TxnProducer(send=KafkaError(KafkaError._TIMED_OUT, "coordinator unreachable", retriable=True)), []
    why = released(p, made=made)
    assert why == "adding the group's offsets to a transaction: coordinator unreachable"  # the lane asks again
    assert p.calls[1:] == ["abort"]
    assert [m.calls for m in made] == [["init", "begin"]]


def test_after_an_abort_the_next_transaction_is_a_new_producers_in_a_new_epoch():
    # librdkafka keeps its producer id and epoch across an abort (no KIP-890 epoch bump): a Produce of the aborted
    # transaction still on its way would land in the next one and commit with it. A new producer bumps the epoch.
    made: list[TxnProducer] = []

    def create(part, make, start):
        made.append(TxnProducer())
        return made[-1]

    w = txn_writer("zstd", create=create)
    w.begin_transactions("transcoder-g-0123", 1.0, "g")
    first = w.producer
    w.abort_transaction(1.0)
    assert w.producer is made[1] and w.producer is not first
    assert [m.calls for m in made] == [["init", "begin", "abort"], ["init", "begin"]]
    assert w.transactional_id == "transcoder-g-0123"
    w.commit_transaction([TopicPartition("s", 0, 7)], "group-metadata", 1.0)
    assert made[1].calls[2:] == [("send_offsets", [("s", 0, 7)], "group-metadata"), "commit", "begin"]
    assert len(made) == 2  # a commit keeps the producer


def test_a_fenced_producer_stops_the_release_and_says_so():
    p = TxnProducer(send=KafkaError(KafkaError._FENCED, "fenced by a newer epoch", fatal=True))
    with pytest.raises(TranscoderError, match="another instance took over transactional.id transcoder-g-0123"):
        released(p)
    assert [c for c in p.calls if c == "abort"] == []


def test_an_abort_refused_for_good_is_raised_not_retried():
    p = TxnProducer(abort=KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "not authorized"))
    with pytest.raises(TranscoderError, match="could not abort a transaction: not authorized") as raised:
        released(p)
    assert raised.value.retriable is False


class _StuckProducer(Producer):
    """librdkafka's producer whose send_offsets_to_transaction blocks past its timeout (librdkafka issue 5456: the
    group coordinator gone) until `release` is set."""

    release = threading.Event()

    def send_offsets_to_transaction(self, offsets, group, timeout=None):
        self.release.wait(10)

    def commit_transaction(self, timeout=None):
        raise AssertionError("committed after a send_offsets_to_transaction that never returned")


def test_a_send_offsets_call_stuck_in_librdkafka_is_given_up_not_waited_on_for_ever(monkeypatch):
    # Seen in a fresh-clone CI: the broker SIGKILLed and restarted, a lane's send_offsets_to_transaction (timeout
    # 2 s) never returned, and the copy hung until the test gave up on it.
    import time

    from transcoder.kafka.writer import transactions as writer_transactions

    monkeypatch.setattr(writer_transactions, "STUCK_AFTER_S", 0.3)
    w = txn_writer("lz4")
    w.transactional_id = "transcoder-g-0123"
    w.producer = _StuckProducer({"bootstrap.servers": "127.0.0.1:1"})
    started = time.monotonic()
    try:
        with pytest.raises(writer_transactions.TransactionStuck, match="send_offsets_to_transaction did not return"):
            w.transactions.commit(w.producers[0], [TopicPartition("s", 0, 5)], "group-metadata", 0.5)
        assert time.monotonic() - started < 5  # its timeout (clamped to 1 s) and STUCK_AFTER_S, not the call's 10 s
    finally:
        _StuckProducer.release.set()
