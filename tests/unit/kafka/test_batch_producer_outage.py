"""The batch producer (zstd 13-22) while Kafka is unreachable, without a broker: failures logged with back-off and
a count, the sender's retries backing off, kafka-python reconnecting promptly and keeping its own lines quiet.
The outage on the real broker is tests/integration/test_faults.py."""

from __future__ import annotations

import io
import logging
import threading
import time
from typing import Any

import pytest
import structlog
from kafka.errors import KafkaConnectionError

from transcoder.kafka import protocol
from transcoder.kafka.producer import BatchProducer, FailureLog


@pytest.fixture(autouse=True)
def _fresh_logger(fresh_structlog: None) -> None:
    """The producer's parts look their logger up at each use: structlog's defaults of this test reach them."""


def test_a_repeated_failure_is_logged_at_once_then_every_30_s_with_a_count():
    flog = FailureLog("c1")
    with structlog.testing.capture_logs() as logs:
        for i in range(650):  # 65 s of a failure every 100 ms
            flog.failed("metadata_request_failed", 1000 + i / 10, error="ECONNREFUSED")
        flog.succeeded("metadata_request_failed", 1066.0)
        flog.succeeded("metadata_request_failed", 1067.0)  # nothing was failing: nothing to say
    failures = [e for e in logs if e["event"] == "metadata_request_failed"]
    # each line: the failures since the last line, and the total of this outage
    assert [e["failures"] for e in failures] == [1, 300, 300]
    assert [e.get("total", 1) for e in failures] == [1, 301, 601]
    assert all(e["since"] == failures[0]["since"] and e["client_id"] == "c1" for e in failures)
    assert all(e["log_level"] == "warning" for e in failures)
    again = [e for e in logs if e["event"] == "kafka_requests_succeed_again"]
    assert len(again) == 1 and again[0]["total"] == 650 and again[0]["failures"] == 49
    assert again[0]["after_s"] == 66.0
    # A new outage starts a new count.
    with structlog.testing.capture_logs() as logs:
        flog.failed("metadata_request_failed", 2000.0, error="ECONNREFUSED")
    assert [e["failures"] for e in logs] == [1]


class _Unreachable:
    """A RawClient whose metadata requests fail until `reachable` is set; produce always answers."""

    def __init__(self) -> None:
        self.reachable = threading.Event()
        self.metadata_calls = 0
        self.offsets: dict[tuple[str, int], int] = {}

    def init_producer_id(self) -> tuple[int, int, int]:
        return 0, 7, 0

    def leaders(self, topics: Any) -> dict[tuple[str, int], int]:
        self.metadata_calls += 1
        if not self.reachable.is_set():
            raise KafkaConnectionError("111 ECONNREFUSED")
        return {(t, p): 1 for t in topics for p in range(2)}

    def produce(self, batches: Any, *, leader: int, timeout_ms: int,
                **txn: Any) -> dict[tuple[str, int], tuple[int, int]]:
        out = {}
        for tp in batches:
            out[tp] = (0, self.offsets.get(tp, 0))
            self.offsets[tp] = self.offsets.get(tp, 0) + 1000
        return out

    def produce_start(self, batches: Any, **kwargs: Any) -> dict[tuple[str, int], tuple[int, int]]:
        return self.produce(batches, **kwargs)  # answered at once: the answers are the "call"

    def produce_answers(self, answers: dict[tuple[str, int], tuple[int, int]]
                        ) -> dict[tuple[str, int], tuple[int, int]]:
        return answers

    def produce_record_errors(self, answers: Any) -> dict[tuple[str, int], tuple[int, ...]]:
        return {}  # names no record: a refused batch is cut in halves

    def close(self) -> None:
        pass


def test_while_kafka_is_unreachable_the_sender_backs_off_logs_once_and_delivers_after():
    delivered: list[tuple[int, bytes]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else delivered.append((msg.partition(), msg.key())))

    fake = _Unreachable()
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="zstd", level=19, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=100, on_delivery=on_delivery, client=fake)
    with structlog.testing.capture_logs() as logs:
        p.start()
        for i in range(500):
            p.produce("t", value=b"v", key=str(i).encode(), partition=i % 2)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            p.poll(0.1)
        calls_while_down = fake.metadata_calls
        fake.reachable.set()
        deadline = time.monotonic() + 30
        while len(delivered) < 500 and time.monotonic() < deadline:
            p.poll(0.1)
        p.close(5)
    assert not errors
    assert len(delivered) == 500
    for part in (0, 1):  # in produce order per partition: the ledger's FIFO holds
        assert [k for q, k in delivered if q == part] == [str(i).encode() for i in range(part, 500, 2)]
    # Retried every 100 ms, 3 s of outage were ~30 metadata requests; backing off to 1 s, at most ~8.
    assert calls_while_down <= 10, calls_while_down
    events = [e["event"] for e in logs]
    assert events.count("metadata_request_failed") == 1, events
    assert events.count("kafka_requests_succeed_again") == 1, events


def test_kafka_python_reconnects_within_a_second_after_an_outage(monkeypatch: pytest.MonkeyPatch):
    made: list[dict[str, Any]] = []

    class FakeAdmin:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

    import kafka.admin

    monkeypatch.setattr(kafka.admin, "KafkaAdminClient", FakeAdmin)
    protocol.RawClient({"bootstrap.servers": "a:9092"})._client()
    # kafka-python's default is 30 s: after a minute's outage the batch producer stayed cut off for up to 30 s more.
    assert made[0]["reconnect_backoff_max_ms"] <= 1000


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("kafka").level)
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger("kafka").setLevel(saved[2])
    structlog.reset_defaults()


@pytest.mark.parametrize("level,shown", [("info", False), ("warning", False), ("debug", True)])
def test_kafka_pythons_own_lines_are_for_debugging_only(restore_logging: None, level: str, shown: bool):
    from transcoder import logs

    out = io.StringIO()
    logs.configure(level, stream=out, json=True)
    logging.getLogger("kafka.net.manager").error("Connection failed: KafkaConnectionError: 111 ECONNREFUSED")
    logging.getLogger("kafka.cluster").warning("No node available for metadata refresh - backoff/retry")
    text = out.getvalue()
    assert ("ECONNREFUSED" in text) is shown
    assert ("No node available" in text) is shown
    if shown:  # rendered like transcoder's own lines: JSON with the logger's name
        assert '"logger": "kafka.net.manager"' in text



class _ForgetsProducer(_Unreachable):
    """Answers the first Produce with UNKNOWN_PRODUCER_ID (the broker lost this producer's state), then takes all;
    hands out a new producer id each time, and keeps every payload sent."""

    def __init__(self) -> None:
        super().__init__()
        self.reachable.set()
        self.pids = 0
        self.sent: list[bytes] = []

    def init_producer_id(self) -> tuple[int, int, int]:
        self.pids += 1
        return 0, 100 + self.pids, 0

    def produce(self, batches: Any, *, leader: int, timeout_ms: int) -> dict[tuple[str, int], tuple[int, int]]:
        self.sent.extend(batches.values())
        if len(self.sent) == len(batches):
            return {tp: (59, -1) for tp in batches}  # UNKNOWN_PRODUCER_ID: a new producer id, the same records
        return super().produce(batches, leader=leader, timeout_ms=timeout_ms)


def test_batches_refused_for_an_unknown_producer_id_go_again_under_a_new_one():
    delivered: list[tuple[int, bytes]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else delivered.append((msg.partition(), msg.key())))

    fake = _ForgetsProducer()
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="zstd", level=19, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=1000, on_delivery=on_delivery, client=fake)
    p.start()
    for i in range(100):
        p.produce("t", value=b"v", key=str(i).encode(), partition=i % 2)
    p.flush(10)
    p.close(5)
    assert not errors, errors
    for part in (0, 1):
        assert [k for q, k in delivered if q == part] == [str(i).encode() for i in range(part, 100, 2)]
    # v2 batch header: producerId at byte 43, baseSequence at byte 53
    ids = [(int.from_bytes(b[43:51], "big"), int.from_bytes(b[53:57], "big")) for b in fake.sent]
    assert ids[0][0] == 101 and ids[-1] == (102, 0), ids


class _Picky(_ForgetsProducer):
    """Refuses batches of over 30 records as too large (MESSAGE_TOO_LARGE), forgets the producer id once."""

    forgot = False

    def produce(self, batches: Any, *, leader: int, timeout_ms: int) -> dict[tuple[str, int], tuple[int, int]]:
        from kafka.record import MemoryRecords

        out = {}
        for tp, b in batches.items():
            n = len(list(MemoryRecords(bytes(b)).next_batch()))
            self.sent.append(b)
            if n > 30:
                out[tp] = (10, -1)
            elif not self.forgot:
                self.forgot = True
                out[tp] = (59, -1)  # UNKNOWN_PRODUCER_ID
            else:
                out[tp] = (0, self.offsets.get(tp, 0))
                self.offsets[tp] = self.offsets.get(tp, 0) + n
        return out


def test_sections_are_sealed_split_when_too_large_and_restamped_under_a_new_producer_id():
    import transcoder_native as native
    from kafka.record import MemoryRecords

    stored = b"".join(native.encode_batch([(b"k%d" % i, b"v%d" % i, [], 1000 + i) for i in range(j, j + 50)],
                                          codec="none", base_offset=j) for j in range(0, 200, 50))
    rb = native.Rebatcher(1 << 20, 100)
    rb.add(native.decode_stored(stored, 0), 0)
    sections = rb.take(flush=True)
    assert [len(s) for s in sections] == [100, 100]
    reports: list[tuple] = []
    fake = _Picky()
    p = BatchProducer({"bootstrap.servers": "unused:9092"}, codec="zstd", level=19, client_id="c1", linger_ms=1,
                      max_bytes=1 << 20, max_records=1000, on_delivery=lambda e, m: None,
                      on_batch=lambda err, t, part, base, s: reports.append((err, t, part, base, s.offsets)),
                      client=fake)
    p.start()
    p.produce_sections("t", 0, sections)
    assert len(p) == 200
    assert p.flush(10) == 0
    p.close(5)
    assert [r[0] for r in reports] == [None] * len(reports)
    # 100 -> 50 -> 25 + 25, twice; in source order
    assert [len(r[4]) for r in reports] == [25] * 8
    assert [o for r in reports for o in r[4]] == list(range(200))
    written = [b for b in fake.sent if len(list(MemoryRecords(bytes(b)).next_batch())) <= 30]
    got = []
    for b in written:
        batch = MemoryRecords(bytes(b)).next_batch()
        assert batch.validate_crc()
        got += [(r.key, r.timestamp) for r in batch]
    assert got[-200:] == [(b"k%d" % i, 1000 + i) for i in range(200)]
    # the first written batch was refused for an unknown producer id and went again restamped under the new one
    ids = [(MemoryRecords(bytes(b)).next_batch().producer_id, MemoryRecords(bytes(b)).next_batch().base_sequence)
           for b in written]
    assert ids[-8:] == [(102, 25 * i) for i in range(8)], ids


def test_a_failure_log_speaks_through_its_clients_logger():
    """The fetcher's failures are logged under its own logger, not the batch producer's."""
    said: list[tuple[str, str]] = []

    class Recorder:
        def warning(self, event: str, **fields: Any) -> None:
            said.append(("warning", event))

        def info(self, event: str, **fields: Any) -> None:
            said.append(("info", event))

    flog = FailureLog("c2", logger=Recorder())
    with structlog.testing.capture_logs() as logs:
        flog.failed("fetch_request_failed", 1.0, error="x")
        flog.succeeded("fetch_request_failed", 2.0)
    assert said == [("warning", "fetch_request_failed"), ("info", "kafka_requests_succeed_again")]
    assert logs == []
