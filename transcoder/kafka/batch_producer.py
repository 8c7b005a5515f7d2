"""transcoder's own producer: every destination of a lane on record sets (`hot_path: batches`, the default; their
batches re-batched natively and handed in as sections), and codec levels librdkafka refuses (zstd 13-22). It
builds or seals the v2 record batches itself and sends them with raw Produce requests, idempotently.

It offers the part of confluent_kafka.Producer a lane uses (produce, poll, flush, len, delivery
callbacks, per-topic batch statistics), so a lane treats both alike. Batches are closed by size,
record count and linger (batching.Accumulator); one sender thread frames and compresses them (all
those due at once, in parallel: codecs.encode_batches) and sends them,
one Produce request per leader at a time, with acks=all. Every batch carries this producer's id
and per-partition sequence numbers, so a batch sent again after a timeout is written once.

After a delivery timeout the outcome of the last attempt is unknown; the producer then takes a
new producer id (as librdkafka bumps its epoch), so a later batch is never mistaken for it. A
batch that was in fact written may then be written twice: at least once, never lost.

With `transactions` (exactly-once) it is a transactional producer with confluent_kafka.Producer's transaction
calls (init_transactions, begin_transaction, send_offsets_to_transaction, commit_transaction,
abort_transaction), raising KafkaException with the same flags (txn_requires_abort, fatal, retriable), so the
writer drives both alike. Kafka's transaction protocol v1: the sender adds each partition to the transaction
(AddPartitionsToTxn) before its first batch, batches carry the transactional bit, the offsets go in with
AddOffsetsToTxn and TxnOffsetCommit, EndTxn commits or aborts. Nothing is sent again outside the transaction:
what cannot be delivered makes the transaction abortable, and after every abort the producer bumps its epoch
(InitProducerId with its own id and epoch, KIP-588), which also tells a coordinator's time-out abort
(accepted) from another instance's takeover (PRODUCER_FENCED).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors
import structlog
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException

from transcoder.codecs import Codec, encode_batches, restamp, seal_sections
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.protocol import BrokerInfo
from transcoder.kafka.statistics import TopicProduce, Window
from transcoder.kafka.transaction_state import TransactionManager, TxnEvent, TxnState
from transcoder.pipeline import batching
from transcoder.pipeline.batching import Accumulator, Outcome, TxnStep
from transcoder.pipeline.partitions import partition_for_key

log = structlog.get_logger("transcoder.batchproducer")

#: A failure that repeats (every retry while Kafka is unreachable fails alike) is logged at once, then at most
#: once per this many seconds, with a count.
FAILURE_LOG_INTERVAL_S = 30.0
#: While every round of the sender fails (Kafka unreachable), the pause between rounds doubles up to this.
MAX_RETRY_BACKOFF_S = 1.0

Headers = Sequence[tuple[str, bytes | None]]
#: key, value, headers, timestamp (ms), size (key + value + header bytes)
_Record = tuple[bytes | None, bytes | None, Headers, int, int]


class Delivered:
    """A produced record as a delivery callback sees it: the accessors of confluent_kafka.Message."""

    __slots__ = ("_offset", "_partition", "_record", "_topic")

    def __init__(self, topic: str, partition: int, offset: int, record: _Record) -> None:
        self._topic, self._partition, self._offset, self._record = topic, partition, offset, record

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._record[0]

    def value(self) -> bytes | None:
        return self._record[1]

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return list(self._record[2]) or None

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, self._record[3]

    def error(self) -> None:
        return None


class FailureLog:
    """Logs failures that repeat with back-off and a count: the first at once, then at most one line per
    `interval_s` (failures=N since=<first failure>), and one line when the same request succeeds again.

    Kafka unreachable for a minute is hundreds of failed attempts (a metadata request every retry): one line
    per attempt hid everything else. Time (monotonic seconds) is passed in."""

    def __init__(self, client_id: str, *, interval_s: float = FAILURE_LOG_INTERVAL_S, logger: Any = None) -> None:
        self.client_id, self.interval_s = client_id, interval_s
        #: the client's own logger (the fetcher's, say); the batch producer's by default
        self._logger = logger
        #: event -> [failures, first (monotonic), last logged (monotonic), first (ISO, UTC)]
        self._open: dict[str, list[Any]] = {}

    def failed(self, event: str, now: float, **fields: Any) -> None:
        st = self._open.get(event)
        if st is None:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self._open[event] = [1, now, now, since]
            self._log.warning(event, client_id=self.client_id, failures=1, since=since, **fields)
            return
        st[0] += 1
        if now - st[2] >= self.interval_s:
            st[2] = now
            self._log.warning(event, client_id=self.client_id, failures=st[0], since=st[3],
                        note=f"retrying; logged at most once per {self.interval_s:.0f} s", **fields)

    @property
    def _log(self) -> Any:
        return self._logger if self._logger is not None else log

    def succeeded(self, event: str, now: float) -> None:
        st = self._open.pop(event, None)
        if st is not None:
            self._log.info("kafka_requests_succeed_again", client_id=self.client_id, after=event, failures=st[0],
                     after_s=round(now - st[1], 1))


@dataclass(frozen=True)
class Transactions:
    """exactly-once: the transactional id, its transactions' time-out, and the consumer group whose offsets
    they commit."""

    transactional_id: str
    group_id: str
    timeout_ms: int = 60_000


#: The pause between tries of a transaction request the coordinator answered "busy" (CONCURRENT_TRANSACTIONS
#: while the last transaction's markers are written, COORDINATOR_LOAD_IN_PROGRESS).
TXN_RETRY_BACKOFF_S = 0.02


@dataclass
class _Batch:
    tp: tuple[str, int]
    records: list[_Record] | None  # the records framed here, or None for a section
    base_sequence: int
    payload: bytes
    first_sent: float  # monotonic
    size: int  # sum of the records' sizes
    reported: bool = False  # its delivery report is queued: it is never reported again
    acked_at: float = 0.0  # when its answer came (epoch seconds): the report's latency is to then, not to `poll`
    section: Any = None  # a transcoder_native.Section: records re-batched elsewhere, sealed here

    @property
    def count(self) -> int:
        return len(self.section) if self.section is not None else len(self.records or ())


@dataclass
class _Round:
    """One round of the sender: its Produce requests in flight, by leader (the batches, and the Call; or the
    error that kept it from being sent), and the batches not sent (no leader, or not yet in the transaction)."""

    started: dict[int, tuple[dict[tuple[str, int], _Batch], Any]]
    retry: dict[tuple[str, int], _Batch]


#: AddPartitionsToTxn's answer for partitions it did not add because another of the request failed.
_OPERATION_NOT_ATTEMPTED = 55


def _first_error(codes: Mapping[Any, int]) -> int:
    return next((c for c in codes.values() if c), 0)


class BatchProducer:
    def __init__(self, librdkafka: Mapping[str, Any], *, codec: Codec, level: int | None, client_id: str,
                 linger_ms: int, max_bytes: int, max_records: int,
                 on_delivery: Callable[[KafkaError | None, Delivered], None],
                 on_stats: Callable[[dict[str, TopicProduce]], None] | None = None, stats_interval_ms: int = 5000,
                 on_batch: Callable[[KafkaError | None, str, int, int, Any], None] | None = None,
                 queue_max_bytes: int = 256 * 1024 * 1024, request_timeout_ms: int = 30_000,
                 delivery_timeout_ms: int = 300_000, retry_backoff_ms: int = 100,
                 transactions: Transactions | None = None) -> None:
        self.codec, self.level, self.client_id = codec, level, client_id
        self._txn: TransactionManager | None = None
        self.transactions = transactions
        #: the coordinators' broker ids (transaction, group), looked up when first needed and when they move
        self._coordinators: dict[int, int] = {}
        self._info = BrokerInfo({**librdkafka, "client.id": client_id}, timeout_s=request_timeout_ms / 1000)
        #: the coordinators' connection, apart from the Produce requests': a broker throttling this client's
        #: produce rate (a quota) mutes the connection that carried them, and the commit must still get through
        self._coord = BrokerInfo({**librdkafka, "client.id": client_id}, timeout_s=request_timeout_ms / 1000) \
            if transactions is not None else self._info
        self._acc: Accumulator[_Record] = Accumulator(max_bytes=max_bytes, max_records=max_records,
                                                      linger_s=linger_ms / 1000)
        self._on_delivery = on_delivery
        #: topic -> the callback its records' reports go to instead (produce's on_delivery)
        self._topic_delivery: dict[str, Callable[[KafkaError | None, Delivered], None]] = {}
        self._partition_counts: dict[str, int] = {}
        #: sections' reports: (error, topic, partition, base offset, section), once per batch
        self._on_batch = on_batch
        #: when the batch whose report `on_batch` is being given was acknowledged (epoch seconds); 0: none yet
        self.reported_at = 0.0
        #: batches made elsewhere (transcoder_native Sections), per partition in order, and the records they hold
        #: until reported
        self._sections: dict[tuple[str, int], deque[Any]] = {}
        self._section_records = 0
        self._on_stats = on_stats
        self._stats_interval = stats_interval_ms / 1000
        self._queue_max_bytes = queue_max_bytes
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout = delivery_timeout_ms / 1000
        self._backoff = retry_backoff_ms / 1000
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the sender waits on it for batches
        self._delivered = threading.Condition(self._lock)  # poll waits on it for delivery reports
        self._busy = False  # the sender is in a round (outside the lock)
        self._idle = threading.Condition(self._lock)  # abort waits on it for the round in flight
        self._purges = 0  # aborts so far: a round that began before one drops what it holds
        self._round_purges = 0  # the aborts before the sender's round in flight began
        self._done: list[tuple[KafkaError | None, _Batch, int]] = []
        self._flushing = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._producer_id, self._epoch = -1, -1
        self._sequence: dict[tuple[str, int], int] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._failures = FailureLog(client_id)
        self._failing_rounds = 0  # consecutive sender rounds that delivered nothing and must retry
        #: this round's AddPartitionsToTxn was answered "busy" (the last transaction's markers being written): the
        #: round is retried after TXN_RETRY_BACKOFF_S, as the Java producer retries it after 20 ms, not after the
        #: back-off for failures (which doubles while rounds fail: 200, 400, 800 ms ... at a transaction's start)
        self._coordinator_busy = False
        # statistics, in librdkafka's terms: batch sizes and record counts since the last emission,
        # and cumulative record bytes and records per topic
        self._batch_bytes: dict[str, list[int]] = {}
        self._batch_records: dict[str, list[int]] = {}
        self._sent: dict[str, list[int]] = {}
        self._next_stats = time.monotonic() + self._stats_interval

    @property
    def transactions(self) -> Transactions | None:
        """exactly-once: this producer's transactions (None: idempotent only); set before it starts."""
        return self._transactions

    @transactions.setter
    def transactions(self, transactions: Transactions | None) -> None:
        self._transactions = transactions
        #: exactly-once: where the transaction stands (its state, what EndTxn ends, why it failed), moved under
        #: `_lock` by the caller's thread and the sender's
        self._txn = TransactionManager(transactions.transactional_id) if transactions is not None else None

    # ------------------------------------------------------------------ the caller's side
    def start(self) -> None:
        """Connect, take a producer id and start the sender thread; KafkaUnavailableError if it cannot
        (within the request timeout). A transactional producer starts with `init_transactions`."""
        if self._thread is not None:
            return
        if self.transactions is None:
            self._renew_producer_id(self._request_timeout_ms / 1000)
        else:
            self._init_transactional(self._request_timeout_ms / 1000, own=False)
        self._thread = threading.Thread(target=self._run, name=f"tc-send:{self.client_id}"[:60], daemon=True)
        self._thread.start()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1, *,
                timestamp: int = 0, headers: Headers | None = None,
                on_delivery: Callable[[KafkaError | None, Delivered], None] | None = None) -> None:
        """Queue one record (in a transactional producer: in the open transaction); BufferError when the queue is
        full (poll, then produce again). No `partition`: the key's, as librdkafka's default partitioner chooses.
        `on_delivery`: the reports of `topic`'s records go to it rather than the producer's callback (the offset
        map's records, written through the lane's producer)."""
        if self._thread is None:
            self.start()
        if partition < 0:
            if not key:
                raise ValueError(f"producer {self.client_id}: a record for {topic} needs a partition or a key")
            partition = partition_for_key(key, self._partition_count(topic))
        if on_delivery is not None:
            self._topic_delivery[topic] = on_delivery
        headers = headers or ()
        size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        for h_key, h_value in headers:
            size += len(h_key) + (len(h_value) if h_value is not None else 0)
        ts = timestamp or int(time.time() * 1000)
        with self._lock:
            if self._closing:
                raise RuntimeError(f"producer {self.client_id} is closed")
            if self._acc.bytes and self._acc.bytes + size > self._queue_max_bytes:
                raise BufferError(f"producer {self.client_id}: queue full ({self._acc.bytes} bytes)")
            if self._acc.add((topic, partition), (key, value, headers, ts, size), size, time.monotonic()):
                self._wake.notify()

    def _partition_count(self, topic: str) -> int:
        """`topic`'s partitions, asked of Kafka once; KafkaUnavailableError naming the topic when it has none."""
        from kafka.errors import KafkaError as KPError

        n = self._partition_counts.get(topic)
        if n is None:
            try:
                n = len(self._coord.leaders([topic]))
            except KPError as exc:
                raise KafkaUnavailableError(f"producer {self.client_id}: the partitions of {topic}: {exc!r}",
                                            topic=topic, retriable=True) from exc
            if not n:
                raise KafkaUnavailableError(f"producer {self.client_id}: topic {topic} does not exist", topic=topic)
            self._partition_counts[topic] = n
        return n

    def produce_sections(self, topic: str, partition: int, sections: Sequence[Any]) -> None:
        """Queue batches made elsewhere (transcoder_native Sections, in order); each is sealed with this
        producer's id and sequence and reported once, to `on_batch`. No linger: they go as soon as they can."""
        if self._on_batch is None:
            raise RuntimeError(f"producer {self.client_id} takes no sections (no on_batch callback)")
        if self._thread is None:
            self.start()
        with self._lock:
            if self._closing:
                raise RuntimeError(f"producer {self.client_id} is closed")
            self._sections.setdefault((topic, partition), deque()).extend(sections)
            self._section_records += sum(len(x) for x in sections)
            self._wake.notify()

    def poll(self, timeout: float = 0) -> int:
        """Serve delivery reports (in this thread), waiting up to `timeout` seconds for the first one."""
        with self._lock:
            if not self._done and timeout > 0:
                self._delivered.wait(timeout)
            done, self._done = self._done, []
        served = 0
        for err, batch, base in done:
            topic, partition = batch.tp
            if batch.section is not None:
                assert self._on_batch is not None
                self.reported_at = batch.acked_at
                self._on_batch(err, topic, partition, base, batch.section)
                with self._lock:
                    self._section_records -= batch.count
            else:
                assert batch.records is not None
                report = self._topic_delivery.get(topic, self._on_delivery)
                for i, rec in enumerate(batch.records):
                    report(err, Delivered(topic, partition, base + i if base >= 0 else -1, rec))
                with self._lock:
                    self._acc.taken(len(batch.records), batch.size)
            served += batch.count
        self._maybe_emit_stats()
        return served

    def flush(self, timeout: float | None = None) -> int:
        """Send everything held now (linger ignored) and serve its reports; return how many are left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing = True
            self._wake.notify()
        try:
            while len(self) and not self.doomed:  # doomed: the caller aborts what is left
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.poll(0.1 if left is None else min(0.1, left))
        finally:
            with self._lock:
                self._flushing = False
        self._emit_stats()
        return len(self)

    def __len__(self) -> int:
        return len(self._acc) + self._section_records  # held, in flight, or delivered with the report not yet served

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is held (bounded by `timeout`), stop the sender after its request in flight,
        close the connection. Records not delivered by then get no report: the lane never commits them."""
        self.flush(timeout)
        with self._lock:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, self._request_timeout_ms / 1000 + 5))
        self._info.close()
        self._coord.close()

    # ------------------------------------------------------------------ transactions (the caller's side)
    def init_transactions(self, timeout: float) -> None:
        """Take this transactional id's producer id and epoch (fencing any earlier holder: the coordinator aborts
        what it left open) and start the sender. KafkaException as confluent_kafka's."""
        if self.transactions is None:
            raise RuntimeError(f"producer {self.client_id} has no transactional id")
        if self._thread is None:
            self._init_transactional(timeout, own=False)
            self._thread = threading.Thread(target=self._run, name=f"tc-send:{self.client_id}"[:60], daemon=True)
            self._thread.start()

    def begin_transaction(self) -> None:
        """A transaction begins with its first batch (the sender adds its partition): nothing to ask here. The
        open one is empty (after init_transactions, a commit or an abort); KafkaException if it failed."""
        self._move(TxnEvent.BEGIN)

    def send_offsets_to_transaction(self, offsets: Sequence[Any], group_metadata: Any, timeout: float) -> None:
        """Commit the consumer group's `offsets` (confluent_kafka TopicPartitions) with the open transaction.
        The group is this producer's `transactions.group_id` (`group_metadata` is the consumer's, unused: the
        transactional id is per assignment, so an old member is fenced by the id, not by the generation)."""
        assert self.transactions is not None and self._txn is not None
        with self._lock:
            self._raise_failed()
            self._txn.check(TxnEvent.ADD)  # the offsets are added below, once the coordinator answered
        deadline = time.monotonic() + timeout
        t = self.transactions
        self._txn_request("AddOffsetsToTxn", lambda node: self._coord.add_offsets_to_txn(
            t.transactional_id, self._producer_id, self._epoch, t.group_id, coordinator=node), deadline)
        with self._lock:
            self._txn.added(offsets=True)
        commits = {(o.topic, o.partition): o.offset for o in offsets}
        self._txn_request("TxnOffsetCommit", lambda node: _first_error(self._coord.txn_offset_commit(
            t.transactional_id, t.group_id, self._producer_id, self._epoch, commits, coordinator=node)),
            deadline, group=True)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every batch of the open transaction, then commit it (EndTxn). KafkaException (with
        txn_requires_abort) when it cannot commit: abort it."""
        deadline = time.monotonic() + (timeout if timeout is not None else self._request_timeout_ms / 1000)
        left = self.flush(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._raise_failed()
        if left:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"producer {self.client_id}: {left} records "
                                            "not delivered in time", txn_requires_abort=True))
        self._end(True, deadline)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop what the open transaction holds (queued, or waiting to be sent again; reports not yet served),
        abort it (EndTxn) and bump the epoch (KIP-588), so no batch of it can ever land later. KafkaException:
        fatal when another instance took the transactional id over."""
        assert self.transactions is not None and self._txn is not None
        deadline = time.monotonic() + (timeout if timeout is not None else self._request_timeout_ms / 1000)
        with self._lock:
            if self._txn.state is TxnState.FATAL_ERROR:
                raise KafkaException(self._txn.error)
            self._txn.transition(TxnEvent.ABORT)
            self._purges += 1
            self._acc.clear()
            self._sections.clear()
            while self._busy:  # the round in flight ends (bounded by the request timeout)
                self._idle.wait(0.1)
            self._acc.clear()
            self._done = []
            self._section_records = 0
        try:
            self._end(False, deadline)
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            # fenced, or the coordinator aborted it already (transaction.timeout.ms): the epoch bump below says
        self._init_transactional(max(1.0, deadline - time.monotonic()), own=True)

    def _end(self, commit: bool, deadline: float) -> None:
        """EndTxn, when the transaction holds anything (a commit: after COMMIT, an abort: in ABORTING); the next
        one begins empty."""
        assert self.transactions is not None and self._txn is not None
        t = self.transactions
        if commit:
            self._move(TxnEvent.COMMIT)
        if self._txn.holds_anything:
            self._txn_request("EndTxn", lambda node: self._coord.end_txn(
                t.transactional_id, self._producer_id, self._epoch, commit, coordinator=node), deadline)
        with self._lock:
            self._txn.ended()

    @property
    def doomed(self) -> bool:
        """Whether the open transaction cannot commit any more (the caller aborts it)."""
        return self._txn is not None and self._txn.failed

    def _move(self, event: TxnEvent) -> None:
        """The caller's move of the transaction: KafkaException with the reason when it failed, else `event`."""
        assert self._txn is not None
        with self._lock:
            self._raise_failed()
            self._txn.transition(event)

    def _raise_failed(self) -> None:
        """Under the lock: KafkaException with the reason, when the transaction failed (abortable, or fatal)."""
        if self._txn is not None and self._txn.failed:
            raise KafkaException(self._txn.error)

    def _init_transactional(self, timeout: float, *, own: bool) -> None:
        """InitProducerId for the transactional id: a new epoch, sequences from 0. `own`: with this producer's
        id and epoch (KIP-588), refused with PRODUCER_FENCED when another instance holds the id now."""
        assert self.transactions is not None and self._txn is not None
        t = self.transactions
        pid, epoch = (self._producer_id, self._epoch) if own else (-1, -1)
        with self._lock:
            self._txn.transition(TxnEvent.INIT)
        got: list[tuple[int, int]] = []

        def ask(node: int) -> int:
            code, new_pid, new_epoch = self._coord.init_producer_id(
                transactional_id=t.transactional_id, transaction_timeout_ms=t.timeout_ms, producer_id=pid,
                producer_epoch=epoch, coordinator=node)
            got.append((new_pid, new_epoch))
            return code

        self._txn_request("InitProducerId", ask, time.monotonic() + timeout, fenced_is_final=True)
        with self._lock:
            self._producer_id, self._epoch = got[-1]
            self._sequence.clear()
            self._txn.initialized()
        log.info("producer_id", client_id=self.client_id, producer_id=self._producer_id, epoch=self._epoch,
                 transactional_id=t.transactional_id)

    def _txn_request(self, what: str, ask: Callable[[int], int], deadline: float, *, group: bool = False,
                     fenced_is_final: bool = False) -> None:
        """One transaction request asked of its coordinator until done: again after a back-off while it is busy,
        of the new one when it moved. KafkaException as librdkafka raises it: fatal (fenced for good,
        unauthorized), txn_requires_abort (this transaction cannot commit; fenced-or-timed-out too, which the
        epoch bump after the abort tells apart), retriable (still busy at the deadline)."""
        from kafka.errors import KafkaError as KPError

        assert self.transactions is not None
        key_type = 0 if group else 1
        key = self.transactions.group_id if group else self.transactions.transactional_id
        while True:
            try:
                node = self._coordinators.get(key_type)
                if node is None:
                    node = self._coordinators[key_type] = self._coord.find_coordinator(key, key_type)
                code = ask(node)
                retriable = kafka.errors.for_code(code).retriable if code else False
            except (KPError, KafkaUnavailableError) as exc:  # no answer: ask again (the coordinator may have moved)
                self._coordinators.pop(key_type, None)
                code, retriable, why = KafkaError._TRANSPORT, True, repr(exc)
            else:
                why = KafkaError(code).str() if code else ""
            step = batching.txn_step(code, retriable) if code != KafkaError._TRANSPORT else TxnStep.RETRY
            if step is TxnStep.DONE:
                self._failures.succeeded(f"{what}_failed", time.monotonic())
                return
            where = f"producer {self.client_id}, transactional.id {self.transactions.transactional_id}: {what}: {why}"
            if step is TxnStep.FATAL or (step is TxnStep.FENCED and fenced_is_final):
                err = KafkaError(code, where, fatal=True)
                self._fail(err)
                raise KafkaException(err)
            if step in (TxnStep.FENCED, TxnStep.ABORTABLE):
                raise KafkaException(KafkaError(code, where, txn_requires_abort=True))
            busy = code in (batching.CONCURRENT_TRANSACTIONS, batching.COORDINATOR_LOAD_IN_PROGRESS)
            if step is TxnStep.REFIND:
                self._coordinators.pop(key_type, None)
            if not busy:  # busy is expected (the last transaction's markers are being written): not a failure
                self._failures.failed(f"{what}_failed", time.monotonic(), error=why)
            if time.monotonic() >= deadline:
                raise KafkaException(KafkaError(code, where, retriable=True))
            time.sleep(TXN_RETRY_BACKOFF_S if busy else self._backoff)

    def _add_partitions(self, tps: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """The sender's: add partitions to the open transaction before their first batch; return those added.
        Those not added yet are sent next round; a refusal that dooms the transaction makes it abortable."""
        assert self.transactions is not None
        t = self.transactions
        try:
            node = self._coordinators.get(1)
            if node is None:
                node = self._coordinators[1] = self._coord.find_coordinator(t.transactional_id, 1)
            answers = self._coord.add_partitions_to_txn(t.transactional_id, self._producer_id, self._epoch, tps,
                                                       coordinator=node)
        except Exception as exc:  # noqa: BLE001 - no answer: the partitions are added next round
            self._coordinators.pop(1, None)
            self._failures.failed("AddPartitionsToTxn_failed", time.monotonic(), error=repr(exc))
            return set()
        added = {tp for tp, code in answers.items() if code == 0}
        for tp, code in answers.items():
            if code == 0 or code == _OPERATION_NOT_ATTEMPTED:
                continue
            step = batching.txn_step(code, kafka.errors.for_code(code).retriable)
            if step is TxnStep.REFIND:
                self._coordinators.pop(1, None)
            if step in (TxnStep.RETRY, TxnStep.REFIND):
                if code in (batching.CONCURRENT_TRANSACTIONS, batching.COORDINATOR_LOAD_IN_PROGRESS):
                    self._coordinator_busy = True
                else:
                    self._failures.failed("AddPartitionsToTxn_failed", time.monotonic(), error=KafkaError(code).str())
                continue
            why = f"{tp[0]} [{tp[1]}]: AddPartitionsToTxn: {KafkaError(code).str()}"
            if step is TxnStep.FATAL:
                self._fail(KafkaError(code, why, fatal=True))
            else:
                self._doom(KafkaError(code, why, txn_requires_abort=True))
        if added:
            self._failures.succeeded("AddPartitionsToTxn_failed", time.monotonic())
        with self._lock:
            assert self._txn is not None
            self._txn.added(added)
        return added

    def _doom(self, err: KafkaError) -> None:
        """The open transaction cannot commit (the caller sees it at its next commit, flush or poll)."""
        with self._lock:
            assert self._txn is not None
            if self._txn.doom(err):
                log.warning("transaction_abortable", client_id=self.client_id, error=err.str())
            self._delivered.notify_all()

    def _fail(self, err: KafkaError) -> None:
        """Refused for good: the producer stops (every later transaction call raises `err`)."""
        with self._lock:
            assert self._txn is not None
            self._txn.fail(err)
            log.warning("transaction_failed", client_id=self.client_id, error=err.str())
            self._delivered.notify_all()

    # ------------------------------------------------------------------ statistics
    def _maybe_emit_stats(self) -> None:
        if self._on_stats is not None and time.monotonic() >= self._next_stats:
            self._emit_stats()

    def _emit_stats(self) -> None:
        if self._on_stats is None:
            return
        self._next_stats = time.monotonic() + self._stats_interval
        with self._lock:
            batch_bytes, self._batch_bytes = self._batch_bytes, {}
            batch_records, self._batch_records = self._batch_records, {}
            sent = {t: list(v) for t, v in self._sent.items()}
        self._on_stats({t: TopicProduce(batch_bytes=Window.from_values(batch_bytes.get(t, [])),
                                        batch_records=Window.from_values(batch_records.get(t, [])),
                                        record_bytes_total=v[0], records_total=v[1])
                        for t, v in sent.items()})

    # ------------------------------------------------------------------ the sender thread
    def _run(self) -> None:
        retry: dict[tuple[str, int], _Batch] = {}
        #: batches sealed while the last round's Produce requests were in flight: sent next, unless a batch of
        #: their partition was not delivered (then they are sealed again, as their sequence may change)
        ahead: dict[tuple[str, int], _Batch] = {}
        purges = self._purges
        while True:
            with self._lock:
                self._busy = False
                self._idle.notify_all()
                while True:
                    if self._closing:  # close() flushed what it could: the rest is not committed, not lost
                        return
                    if purges != self._purges:  # aborted: what the round held is gone with its transaction
                        purges, retry, ahead = self._purges, {}, {}
                    taken, sections = self._take(time.monotonic(), skip=retry.keys() | ahead.keys())
                    if taken or retry or sections or ahead:
                        break
                    due = self._acc.next_due(time.monotonic())
                    self._wake.wait(0.5 if due is None else min(due, 0.5))
                self._busy = True
                self._round_purges = purges
            batches = {**retry, **ahead}
            ahead = {}
            try:
                batches.update(self._encode(taken, sections))
                taken, sections = {}, {}
                round_ = self._send_start(batches)
                # while the broker writes this round, the next is taken and sealed
                with self._lock:
                    if purges == self._purges and not self._closing:
                        taken, sections = self._take(time.monotonic())
                ahead = self._encode(taken, sections)
                taken, sections = {}, {}
                retry = self._send_finish(round_, ahead)
            except Exception as exc:  # noqa: BLE001 - reported through delivery reports, never lost
                log.error("batch_producer_failed", client_id=self.client_id, error=repr(exc))
                err = KafkaError(KafkaError._FAIL, f"batch producer {self.client_id}: {exc!r}")
                failed = [b for b in [*batches.values(), *ahead.values()] if not b.reported] + [
                    _Batch(tp, records, -1, b"", time.monotonic(), sum(r[4] for r in records))
                    for tp, records in taken.items()] + [
                    _Batch(tp, None, -1, b"", time.monotonic(), s.size, section=s) for tp, s in sections.items()]
                retry, ahead = {}, {}
                if self.transactions is not None:  # what the broker got of these is unknown: the transaction too
                    self._drop(failed, KafkaError(KafkaError._FAIL, err.str(), txn_requires_abort=True))
                    continue
                self._finish([(err, b, -1) for b in failed])
                try:  # what the broker got of these is unknown: never reuse their sequences
                    self._renew_producer_id(self._request_timeout_ms / 1000)
                except Exception as renew_exc:  # noqa: BLE001 - the next batches fail and say why
                    log.error("producer_id_renewal_failed", client_id=self.client_id, error=repr(renew_exc))
            if retry and self._coordinator_busy:
                time.sleep(TXN_RETRY_BACKOFF_S)
            elif retry:  # doubling while every round fails (Kafka unreachable), from retry_backoff_ms
                time.sleep(min(MAX_RETRY_BACKOFF_S, self._backoff * 2 ** min(self._failing_rounds, 16)))

    def _take(self, now: float, *, skip: Collection[tuple[str, int]] = frozenset()
              ) -> tuple[dict[tuple[str, int], list[_Record]], dict[tuple[str, int], Any]]:
        """Under the lock: the batches due now and the next section of each partition, one batch per partition
        (a Produce request holds one per partition), none of the partitions in `skip`."""
        taken = self._acc.take(now, flush=self._flushing, skip=set(skip))
        sections = {tp: q.popleft() for tp, q in self._sections.items() if q and tp not in skip and tp not in taken}
        return taken, sections

    def _unready(self, b: _Batch) -> None:
        """A batch sealed ahead goes back to the front of its partition's queue, to be sealed again: a batch of
        its partition before it was not delivered, so its sequence (or the producer id) may change. Not after an
        abort began meanwhile: it went with its transaction."""
        with self._lock:
            if self._purges != self._round_purges:
                pass
            elif b.section is not None:
                self._sections.setdefault(b.tp, deque()).appendleft(b.section)
            else:
                assert b.records is not None
                self._acc.put_back(b.tp, [b.records])
        self._sequence[b.tp] = b.base_sequence

    def _encode(self, taken: Mapping[tuple[str, int], list[_Record]],
                sections: Mapping[tuple[str, int], Any] | None = None) -> dict[tuple[str, int], _Batch]:
        """The batches taken, framed and compressed all at once: in parallel on all cores, the GIL released."""
        now = time.monotonic()
        out = {}
        tps = list(taken)
        bases = [self._sequence.get(tp, 0) for tp in tps]
        payloads = encode_batches([(taken[tp], self._producer_id, self._epoch, base) for tp, base in zip(tps, bases)],
                                  codec=self.codec, level=self.level,
                                  transactional=self.transactions is not None) if tps else []
        for tp, base, payload in zip(tps, bases, payloads, strict=True):
            records = taken[tp]
            self._sequence[tp] = batching.next_sequence(base, len(records))
            out[tp] = _Batch(tp, records, base, payload, now, sum(r[4] for r in records))
        if sections:
            stps = list(sections)
            bases = [self._sequence.get(tp, 0) for tp in stps]
            sealed = seal_sections([sections[tp] for tp in stps],
                                   [(self._producer_id, self._epoch, base) for base in bases],
                                   codec=self.codec, level=self.level, transactional=self.transactions is not None)
            for tp, base, payload in zip(stps, bases, sealed, strict=True):
                s = sections[tp]
                self._sequence[tp] = batching.next_sequence(base, len(s))
                out[tp] = _Batch(tp, None, base, payload, now, s.size, section=s)
        return out

    def _stamp_again(self, retry: Mapping[tuple[str, int], _Batch]) -> dict[tuple[str, int], _Batch]:
        """Batches to send again under a new producer id: records framed again, sections' batches restamped
        (their header and CRC; what is compressed stays)."""
        out = self._encode({tp: b.records for tp, b in retry.items() if b.section is None and b.records is not None})
        for tp, b in retry.items():
            if b.section is not None:
                base = self._sequence.get(tp, 0)
                self._sequence[tp] = batching.next_sequence(base, b.count)
                out[tp] = _Batch(tp, None, base, restamp(b.payload, self._producer_id, self._epoch, base),
                                 b.first_sent, b.size, section=b.section)
        return out

    def _send_start(self, batches: dict[tuple[str, int], _Batch]) -> _Round:
        """Send each batch once, one Produce request per leader, all in flight at once; _send_finish reads the
        answers."""
        from kafka.errors import KafkaError as KPError

        self._coordinator_busy = False

        missing = {tp[0] for tp in batches if self._leaders.get(tp, -1) < 0}
        if missing:
            try:
                self._leaders.update(self._info.leaders(missing))
                self._failures.succeeded("metadata_request_failed", time.monotonic())
            except KPError as exc:
                self._failures.failed("metadata_request_failed", time.monotonic(), error=repr(exc))
        by_leader: dict[int, dict[tuple[str, int], _Batch]] = {}
        retry: dict[tuple[str, int], _Batch] = {}
        if self._txn is not None:
            if self._txn.failed:  # the transaction is lost: nothing more of it is sent
                self._drop(list(batches.values()), self._txn.error)
                return _Round({}, {})
            new = {tp for tp in batches if tp not in self._txn.partitions}
            if new:
                self._add_partitions(new)
        for tp, b in batches.items():
            leader = self._leaders.get(tp, -1)
            if leader < 0 or (self._txn is not None and tp not in self._txn.partitions):
                retry[tp] = b
            else:
                by_leader.setdefault(leader, {})[tp] = b
        started: dict[int, tuple[dict[tuple[str, int], _Batch], Any]] = {}
        txn = {"transactional_id": self.transactions.transactional_id} if self.transactions else {}
        for leader, group in by_leader.items():
            try:
                call: Any = self._info.produce_start({tp: b.payload for tp, b in group.items()}, leader=leader,
                                                     timeout_ms=self._request_timeout_ms, **txn)
            except KPError as exc:  # not sent: read as an unanswered request
                call = exc
            started[leader] = (group, call)
        return _Round(started, retry)

    def _send_finish(self, round_: _Round, ahead: dict[tuple[str, int], _Batch]) -> dict[tuple[str, int], _Batch]:
        """The answers to _send_start's requests (waiting for them): reports for the batches delivered or refused
        for good; return those to send again. A batch sealed `ahead` whose partition's batch in this round was not
        delivered goes back to be sealed again (_unready)."""
        from kafka.errors import KafkaError as KPError

        retry = round_.retry
        done: list[tuple[KafkaError | None, _Batch, int]] = []
        renew = False
        for leader, (group, call) in round_.started.items():
            try:
                if isinstance(call, KPError):
                    raise call
                answers = self._info.produce_answers(call)
            except KPError as exc:  # no answer: the outcome is unknown, the same bytes go again
                self._failures.failed("produce_request_failed", time.monotonic(), leader=leader, error=repr(exc))
                if not isinstance(exc, kafka.errors.NodeNotReadyError):
                    # NodeNotReady: not sent, the connection is paused (the broker throttles this client: a quota)
                    # or backing off. The leader stands; asking the metadata again would fail alike (the only
                    # broker's connection is the paused one) and hold the batches longer.
                    for tp in group:
                        self._leaders.pop(tp, None)
                retry.update(group)
                continue
            self._failures.succeeded("produce_request_failed", time.monotonic())
            for tp, b in group.items():
                code, base_offset = answers.get(tp, (13, -1))  # no answer for it: NETWORK_EXCEPTION
                kind = kafka.errors.for_code(code)
                what = batching.outcome(code, b.count, kind.retriable)
                if what is not Outcome.DELIVERED and tp in ahead:  # before its own sequence is set back (below)
                    self._unready(ahead.pop(tp))
                if what is Outcome.DELIVERED:
                    done.append((None, b, base_offset))
                    self._count(b)
                elif what is Outcome.RETRY:
                    retry[tp] = b
                    if kind.invalid_metadata:  # the partition's leader must be looked up again
                        self._leaders.pop(tp, None)
                elif what is Outcome.RENEW and self.transactions is not None:
                    self._drop([b], KafkaError(code, f"{tp[0]} [{tp[1]}]: {KafkaError(code).str()}",
                                               txn_requires_abort=True))
                elif what is Outcome.RENEW:
                    retry[tp] = b
                    renew = True
                elif what is Outcome.SPLIT:
                    self._sequence[tp] = b.base_sequence  # not written: its sequences go to the halves
                    with self._lock:
                        if self._purges != self._round_purges:  # aborted meanwhile: gone with its transaction
                            pass
                        elif b.section is not None:
                            self._sections.setdefault(tp, deque()).extendleft(reversed(b.section.split()))
                        else:
                            assert b.records is not None
                            half = len(b.records) // 2
                            self._acc.put_back(tp, [b.records[:half], b.records[half:]])
                    log.info("batch_split", client_id=self.client_id, topic=tp[0], partition=tp[1],
                             records=b.count, bytes=len(b.payload))
                elif self.transactions is not None and code in batching.SEQUENCE_BROKEN_CODES | {90}:
                    # fenced, or the coordinator ended the transaction: the abort's epoch bump tells which
                    self._drop([b], KafkaError(code, f"{tp[0]} [{tp[1]}]: {KafkaError(code).str()}",
                                               txn_requires_abort=True))
                else:
                    self._sequence[tp] = b.base_sequence  # not written: the next batch takes its sequences
                    renew = renew or code in batching.SEQUENCE_BROKEN_CODES
                    done.append((KafkaError(code, f"{tp[0]} [{tp[1]}]: {KafkaError(code).str()}: the broker refused "
                                                  f"a batch of {b.count} records ({len(b.payload)} bytes)"), b, -1))
        now = time.monotonic()
        for tp, b in list(retry.items()):
            if now - b.first_sent > self._delivery_timeout and self.transactions is not None:
                del retry[tp]
                self._drop([b], KafkaError(KafkaError._MSG_TIMED_OUT, f"{tp[0]} [{tp[1]}]: not acknowledged within "
                                                                      f"{self._delivery_timeout:.0f} s",
                                           txn_requires_abort=True))
            elif now - b.first_sent > self._delivery_timeout:
                del retry[tp]
                renew = True  # the last attempt's outcome is unknown: never reuse its sequences
                done.append((KafkaError(KafkaError._MSG_TIMED_OUT, f"{tp[0]} [{tp[1]}]: not acknowledged within "
                                                                   f"{self._delivery_timeout:.0f} s"), b, -1))
        self._finish(done)
        self._failing_rounds = self._failing_rounds + 1 if retry and not done else 0
        for tp in [tp for tp in ahead if tp in retry or renew]:  # sealed under a sequence or id that changes
            self._unready(ahead.pop(tp))
        if renew:
            self._renew_producer_id(self._request_timeout_ms / 1000)
            retry = self._stamp_again(retry)
        return retry

    def _count(self, b: _Batch) -> None:
        topic = b.tp[0]
        with self._lock:
            self._batch_bytes.setdefault(topic, []).append(len(b.payload))
            self._batch_records.setdefault(topic, []).append(b.count)
            sent = self._sent.setdefault(topic, [0, 0])
            sent[0] += b.size
            sent[1] += b.count

    def _drop(self, batches: list[_Batch], err: KafkaError) -> None:
        """Transactional: batches the open transaction cannot have; it is doomed (the caller aborts it and reads
        their records again). They get no report: nothing of theirs is committed."""
        with self._lock:
            for b in batches:
                b.reported = True
                if b.section is not None:
                    self._section_records -= b.count
                elif b.records is not None:
                    self._acc.taken(len(b.records), b.size)
        self._doom(err)

    def _finish(self, done: list[tuple[KafkaError | None, _Batch, int]]) -> None:
        if done:
            now = time.time()
            with self._lock:
                for _, b, _ in done:
                    b.reported = True
                    b.acked_at = now
                self._done.extend(done)
                self._delivered.notify_all()

    def _renew_producer_id(self, timeout: float) -> None:
        """Take a (new) producer id; sequences start again at 0."""
        from kafka.errors import KafkaError as KPError

        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            try:
                code, pid, epoch = self._info.init_producer_id()
            except KPError as exc:  # connected, but no answer (KafkaUnavailableError: cannot connect at all)
                code, pid, epoch, last = -1, -1, -1, repr(exc)
            if code == 0:
                self._producer_id, self._epoch = pid, epoch
                self._sequence.clear()
                log.info("producer_id", client_id=self.client_id, producer_id=pid, epoch=epoch)
                return
            if code > 0:
                last = f"InitProducerId error {KafkaError(code).name()}"
                if not kafka.errors.for_code(code).retriable:
                    raise KafkaUnavailableError(f"producer {self.client_id}: {last}", kafka_error=KafkaError(code).name(),
                                                retriable=False)
            if time.monotonic() >= deadline:
                raise KafkaUnavailableError(f"producer {self.client_id}: cannot get a producer id: {last}")
            time.sleep(self._backoff)
