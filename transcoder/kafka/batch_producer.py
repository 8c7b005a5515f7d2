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

Its parts, beside it: produce_batches (a batch as it is held and sent, and its sealing), producer_sequences (the
producer id, epoch and each partition's sequence numbers), batch_sender (the Produce requests: one round's requests
and one handler per outcome of an answer), transaction_state (where the transaction stands: a state enum and its
legal transitions), transaction_requests (each transaction request asked of its coordinator until done),
produce_errors (the one error vocabulary: ProduceError, made confluent_kafka's KafkaError only where a caller reads
it), produce_statistics and failure_log. This module holds the caller's side, what is queued (the accumulator and the
sections) and the sender thread's loop (take, seal, send, and while the broker writes, take and seal the next).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import structlog
from confluent_kafka import KafkaError

from transcoder.codecs import Codec
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.batch_sender import Report, Sender
from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.group_member import GroupMetadataError, group_member
from transcoder.kafka.produce_batches import (
    Batch,
    Delivered,
    Headers,
    Partition,
    Record,
    restamped,
    seal,
)
from transcoder.kafka.produce_errors import (
    FAILED,
    TIMED_OUT,
    NoAnswer,
    ProduceError,
    raises_kafka_exception,
)
from transcoder.kafka.produce_statistics import SentBatches
from transcoder.kafka.producer_sequences import ProducerSequences
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.retries import Backoff, KafkaErrors, retry_backoff_of
from transcoder.kafka.statistics import TopicProduce
from transcoder.kafka.transaction_requests import (
    TXN_RETRY_BACKOFF_S,
    TransactionRequests,
    Transactions,
)
from transcoder.kafka.transaction_state import TransactionManager, TxnEvent, TxnState
from transcoder.pipeline.batching import Accumulator
from transcoder.pipeline.partitions import partition_for_key

# what the writer, the lane and the tests import from here
__all__ = ["TXN_RETRY_BACKOFF_S", "BatchProducer", "Delivered", "FailureLog", "Headers", "Transactions"]

log = structlog.get_logger("transcoder.batchproducer")

#: The sender waits for batches at most this long at a time (then looks again: closing, aborted).
IDLE_WAIT_S = 0.5


class BatchProducer:
    def __init__(self, librdkafka: Mapping[str, Any], *, codec: Codec, level: int | None, client_id: str,
                 linger_ms: int, max_bytes: int, max_records: int,
                 on_delivery: Callable[[KafkaError | None, Delivered], None],
                 on_stats: Callable[[dict[str, TopicProduce]], None] | None = None, stats_interval_ms: int = 5000,
                 on_batch: Callable[[KafkaError | None, str, int, int, Any], None] | None = None,
                 queue_max_bytes: int = 256 * 1024 * 1024, request_timeout_ms: int = 30_000,
                 delivery_timeout_ms: int = 300_000, retry_backoff_ms: int | None = None,
                 transactions: Transactions | None = None, errors: KafkaErrors | None = None) -> None:
        self.codec, self.level, self.client_id = codec, level, client_id
        self._failures = FailureLog(client_id)
        #: retry.backoff.ms and retry.backoff.max.ms: the cluster config's (Kafka's defaults, 100 ms and 1 s, where
        #: it sets none); `retry_backoff_ms` overrides the first
        base_ms, max_ms = retry_backoff_of(librdkafka)
        if retry_backoff_ms is not None:
            base_ms = retry_backoff_ms
        self._backoff = base_ms / 1000
        self.transactions = transactions  # and the transaction's state and requests (the setter)
        self._info = RawClient({**librdkafka, "client.id": client_id}, timeout_s=request_timeout_ms / 1000)
        #: the coordinators' connection, apart from the Produce requests': a broker throttling this client's
        #: produce rate (a quota) mutes the connection that carried them, and the commit must still get through
        self._coord = RawClient({**librdkafka, "client.id": client_id}, timeout_s=request_timeout_ms / 1000) \
            if transactions is not None else self._info
        self._acc: Accumulator[Record] = Accumulator(max_bytes=max_bytes, max_records=max_records,
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
        self._sections: dict[Partition, deque[Any]] = {}
        self._section_records = 0
        self._on_stats = on_stats
        self._stats_interval = stats_interval_ms / 1000
        self._queue_max_bytes = queue_max_bytes
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout = delivery_timeout_ms / 1000
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the sender waits on it for batches
        self._delivered = threading.Condition(self._lock)  # poll waits on it for delivery reports
        self._busy = False  # the sender is in a round (outside the lock)
        self._idle = threading.Condition(self._lock)  # abort waits on it for the round in flight
        self._purges = 0  # aborts so far: a round that began before one drops what it holds
        self._round_purges = 0  # the aborts before the sender's round in flight began
        self._done: list[Report] = []
        self._flushing = False
        self._closing = False
        self._thread: threading.Thread | None = None
        #: the producer id, its epoch and each partition's next sequence (the sender's, and the epoch bump's)
        self._seq = ProducerSequences()
        #: the Produce requests: where the leaders are, how the last rounds went
        self._sender = Sender(self, request_timeout_ms=request_timeout_ms, delivery_timeout_s=self._delivery_timeout,
                              backoff=Backoff(base_ms, max_ms), errors=errors)
        self._stats = SentBatches()
        self._next_stats = time.monotonic() + self._stats_interval

    @property
    def transactions(self) -> Transactions | None:
        """exactly-once: this producer's transactions (None: idempotent only); set before it starts."""
        return self._transactions

    @transactions.setter
    def transactions(self, transactions: Transactions | None) -> None:
        self._transactions = transactions
        #: exactly-once: where the transaction stands (its state, what EndTxn ends, why it failed), moved under
        #: `_lock` by the caller's thread and the sender's; and its requests, with where its coordinators are
        self._txn = TransactionManager(transactions.transactional_id) if transactions is not None else None
        self._requests = TransactionRequests(transactions, self.client_id, self._failures, self._backoff) \
            if transactions is not None else None

    # ------------------------------------------------------------------ the caller's side
    def start(self) -> None:
        """Connect, take a producer id and start the sender thread; KafkaUnavailableError if it cannot
        (within the request timeout). A transactional producer starts with `init_transactions`."""
        if self._thread is not None:
            return
        if self.transactions is None:
            self._sender.renew_producer_id(self._request_timeout_ms / 1000)
        else:
            raises_kafka_exception(self._init_transactional)(self._request_timeout_ms / 1000, own=False)
        self._start_sender()

    def _start_sender(self) -> None:
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
        n = self._partition_counts.get(topic)
        if n is None:
            try:
                n = len(self._coord.leaders([topic]))
            except NoAnswer as exc:
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
        for failed, batch, base in done:
            err = failed.as_kafka_error() if failed is not None else None
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
        self.emit_statistics()
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
    @raises_kafka_exception
    def init_transactions(self, timeout: float) -> None:
        """Take this transactional id's producer id and epoch (fencing any earlier holder: the coordinator aborts
        what it left open) and start the sender. KafkaException as confluent_kafka's."""
        if self.transactions is None:
            raise RuntimeError(f"producer {self.client_id} has no transactional id")
        if self._thread is None:
            self._init_transactional(timeout, own=False)
            self._start_sender()

    @raises_kafka_exception
    def begin_transaction(self) -> None:
        """A transaction begins with its first batch (the sender adds its partition): nothing to ask here. The
        open one is empty (after init_transactions, a commit or an abort); KafkaException if it failed."""
        self._move(TxnEvent.BEGIN)

    @raises_kafka_exception
    def send_offsets_to_transaction(self, offsets: Sequence[Any], group_metadata: Any, timeout: float) -> None:
        """Commit the consumer group's `offsets` (confluent_kafka TopicPartitions) with the open transaction.
        The group is this producer's `transactions.group_id`; `group_metadata` is the consumer's
        (`consumer_group_metadata()`), whose generation, member id and group instance id go with the offsets
        (KIP-447): the group coordinator refuses them from a member of an older generation, and the transaction
        must abort (a zombie's records are never committed). GroupMetadataError when it is not librdkafka's."""
        txn, requests = self._transactional()
        member = group_member(group_metadata) if group_metadata is not None else None  # None: no member (tests)
        if member is not None and member.is_member and member.group_id != requests.transactions.group_id:
            raise GroupMetadataError(f"producer {self.client_id}: offsets of group {member.group_id} offered to a "
                                     f"transaction of group {requests.transactions.group_id}")
        with self._lock:
            self._raise_failed()
            txn.check(TxnEvent.ADD)  # the offsets are added once the coordinator answered
        commits = {(o.topic, o.partition): o.offset for o in offsets}

        def added() -> None:
            with self._lock:
                txn.added(offsets=True)

        self._txn_call(requests.add_offsets, self._coord, self._seq.producer_id, self._seq.epoch, commits,
                       time.monotonic() + timeout, added, member)

    @raises_kafka_exception
    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every batch of the open transaction, then commit it (EndTxn). KafkaException (with
        txn_requires_abort) when it cannot commit: abort it."""
        limit = timeout if timeout is not None else self._request_timeout_ms / 1000
        deadline = time.monotonic() + limit
        left = self.flush(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._raise_failed()
            partitions = sorted(self._transactional()[0].partitions)
        if left:
            where = ", ".join(f"{t} [{p}]" for t, p in partitions[:8]) + (
                f" and {len(partitions) - 8} more" if len(partitions) > 8 else "")
            raise ProduceError(TIMED_OUT, f"producer {self.client_id}: {left} records of the transaction "
                               f"({where or 'no partition added yet'}) not delivered within {limit:g} s",
                               txn_requires_abort=True)
        self._end(True, deadline)

    @raises_kafka_exception
    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop what the open transaction holds (queued, or waiting to be sent again; reports not yet served),
        abort it (EndTxn) and bump the epoch (KIP-588), so no batch of it can ever land later. KafkaException:
        fatal when another instance took the transactional id over."""
        txn, _ = self._transactional()
        deadline = time.monotonic() + (timeout if timeout is not None else self._request_timeout_ms / 1000)
        with self._lock:
            if txn.state is TxnState.FATAL_ERROR:
                raise txn.error
            txn.transition(TxnEvent.ABORT)
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
        except ProduceError as exc:
            if not exc.txn_requires_abort:
                raise
            # fenced, or the coordinator aborted it already (transaction.timeout.ms): the epoch bump below says
        self._init_transactional(max(1.0, deadline - time.monotonic()), own=True)

    @property
    def doomed(self) -> bool:
        """Whether the open transaction cannot commit any more (the caller aborts it)."""
        return self._txn is not None and self._txn.failed

    def _transactional(self) -> tuple[TransactionManager, TransactionRequests]:
        assert self._txn is not None and self._requests is not None, "a transactional producer's call"
        return self._txn, self._requests

    def _end(self, commit: bool, deadline: float) -> None:
        """EndTxn, when the transaction holds anything (a commit: after COMMIT, an abort: in ABORTING); the next
        one begins empty."""
        txn, requests = self._transactional()
        if commit:
            self._move(TxnEvent.COMMIT)
        if txn.holds_anything:
            self._txn_call(requests.end, self._coord, self._seq.producer_id, self._seq.epoch, commit, deadline)
        with self._lock:
            txn.ended()

    def _move(self, event: TxnEvent) -> None:
        """The caller's move of the transaction: its ProduceError when it failed, else `event`."""
        with self._lock:
            self._raise_failed()
            self._transactional()[0].transition(event)

    def _raise_failed(self) -> None:
        """Under the lock: the transaction's ProduceError, when it failed (abortable, or fatal)."""
        if self._txn is not None and self._txn.failed:
            raise self._txn.error

    def _txn_call(self, request: Callable[..., Any], *args: Any) -> Any:
        """A transaction request of the caller's: a fatal refusal stops the producer (every later call raises it)."""
        try:
            return request(*args)
        except ProduceError as exc:
            if exc.fatal:
                self._fail(exc)
            raise

    def _init_transactional(self, timeout: float, *, own: bool) -> None:
        """InitProducerId for the transactional id: a new epoch, sequences from 0. `own`: with this producer's
        id and epoch (KIP-588), refused with PRODUCER_FENCED when another instance holds the id now."""
        txn, requests = self._transactional()
        pid, epoch = (self._seq.producer_id, self._seq.epoch) if own else (-1, -1)
        with self._lock:
            txn.transition(TxnEvent.INIT)
        pid, epoch = self._txn_call(requests.init_producer_id, self._coord, pid, epoch, time.monotonic() + timeout)
        with self._lock:
            self._seq.renew(pid, epoch)
            txn.initialized()
        log.info("producer_id", client_id=self.client_id, producer_id=pid, epoch=epoch,
                 transactional_id=requests.transactions.transactional_id)

    def _add_partitions(self, tps: set[Partition]) -> bool:
        """The sender's: add partitions to the open transaction before their first batch; True when the coordinator
        was busy. Those not added yet are sent next round; a refusal dooms the transaction (or, fatal, stops the
        producer)."""
        txn, requests = self._transactional()
        answer = requests.add_partitions(self._coord, self._seq.producer_id, self._seq.epoch, tps)
        for refused in answer.refused:
            (self._fail if refused.fatal else self._doom)(refused)
        with self._lock:
            txn.added(answer.added)
        return answer.busy

    def _doom(self, err: ProduceError) -> None:
        """The open transaction cannot commit (the caller sees it at its next commit, flush or poll)."""
        with self._lock:
            if self._transactional()[0].doom(err):
                log.warning("transaction_abortable", client_id=self.client_id, error=str(err))
            self._delivered.notify_all()

    def _fail(self, err: ProduceError) -> None:
        """Refused for good: the producer stops (every later transaction call raises `err`)."""
        with self._lock:
            self._transactional()[0].fail(err)
            log.warning("transaction_failed", client_id=self.client_id, error=str(err))
            self._delivered.notify_all()

    # ------------------------------------------------------------------ statistics
    def _maybe_emit_stats(self) -> None:
        if self._on_stats is not None and time.monotonic() >= self._next_stats:
            self.emit_statistics()

    def emit_statistics(self) -> None:
        """Hand `on_stats` the batches sent since the last emission, now (the interval starts again)."""
        if self._on_stats is None:
            return
        self._next_stats = time.monotonic() + self._stats_interval
        with self._lock:
            figures = self._stats.emit()
        self._on_stats(figures)

    # ------------------------------------------------------------------ the sender thread
    def _run(self) -> None:
        retry: dict[Partition, Batch] = {}
        #: batches sealed while the last round's Produce requests were in flight: sent next, unless a batch of
        #: their partition was not delivered (then they are sealed again, as their sequence may change)
        ahead: dict[Partition, Batch] = {}
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
                    now = time.monotonic()
                    # batches to send again whose partition's back-off is over; the others wait, and the other
                    # partitions' batches go meanwhile
                    due = {tp: b for tp, b in retry.items() if self._sender.wait(tp, now) <= 0}
                    taken, sections = self._take(now, skip=retry.keys() | ahead.keys())
                    if taken or due or sections or ahead:
                        break
                    waits = [IDLE_WAIT_S, *(self._sender.wait(tp, now) for tp in retry)]
                    if (linger := self._acc.next_due(now)) is not None:
                        waits.append(linger)
                    self._wake.wait(min(waits))
                self._busy = True
                self._round_purges = purges
            held = {tp: b for tp, b in retry.items() if tp not in due}
            batches = {**due, **ahead}
            ahead = {}
            try:
                batches.update(self._encode(taken, sections))
                taken, sections = {}, {}
                round_ = self._sender.start(batches)
                # while the broker writes this round, the next is taken and sealed
                with self._lock:
                    if purges == self._purges and not self._closing:
                        taken, sections = self._take(time.monotonic(), skip=held.keys())  # held: theirs go first
                ahead = self._encode(taken, sections)
                taken, sections = {}, {}
                retry = {**held, **self._sender.finish(round_, ahead)}
            except Exception as exc:  # noqa: BLE001 - reported through delivery reports, never lost
                self._round_failed(exc, [b for b in [*batches.values(), *ahead.values(), *held.values()]
                                         if not b.reported], taken, sections)
                retry, ahead = {}, {}
            if retry and self._sender.coordinator_busy:
                time.sleep(TXN_RETRY_BACKOFF_S)

    def _round_failed(self, exc: Exception, sealed: list[Batch], taken: Mapping[Partition, list[Record]],
                      sections: Mapping[Partition, Any]) -> None:
        """A round raised: what it held is reported failed (in a transaction: the transaction is lost with it), and
        the producer id renewed, as what the broker got of them is unknown (their sequences are never reused)."""
        log.error("batch_producer_failed", client_id=self.client_id, error=repr(exc))
        why = f"batch producer {self.client_id}: {exc!r}"
        failed = sealed + [Batch(tp, records, -1, b"", time.monotonic(), sum(r[4] for r in records))
                           for tp, records in taken.items()] + [
            Batch(tp, None, -1, b"", time.monotonic(), s.size, section=s) for tp, s in sections.items()]
        if self._txn is not None:
            self._drop(failed, ProduceError(FAILED, why, txn_requires_abort=True))
            return
        self._finish([(ProduceError(FAILED, why), b, -1) for b in failed])
        try:
            self._sender.renew_producer_id(self._request_timeout_ms / 1000)
        except Exception as renew_exc:  # noqa: BLE001 - the next batches fail and say why
            log.error("producer_id_renewal_failed", client_id=self.client_id, error=repr(renew_exc))

    def _take(self, now: float, *, skip: Collection[Partition] = frozenset()
              ) -> tuple[dict[Partition, list[Record]], dict[Partition, Any]]:
        """Under the lock: the batches due now and the next section of each partition, one batch per partition
        (a Produce request holds one per partition), none of the partitions in `skip`."""
        taken = self._acc.take(now, flush=self._flushing, skip=set(skip))
        sections = {tp: q.popleft() for tp, q in self._sections.items() if q and tp not in skip and tp not in taken}
        return taken, sections

    def _unready(self, b: Batch) -> None:
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
        self._seq.set_back(b.tp, b.base_sequence)

    def _split_back(self, b: Batch, pieces: list[Any] | None = None) -> None:
        """A batch too large for the topic goes back as its two halves (or as `pieces`, sections or lists of records
        in order: batch_sender's cut of a batch refused for some records), to be sealed as batches of their own. Not
        after an abort began meanwhile: it went with its transaction."""
        with self._lock:
            if self._purges != self._round_purges:
                pass
            elif b.section is not None:
                self._sections.setdefault(b.tp, deque()).extendleft(reversed(pieces or b.section.split()))
            else:
                assert b.records is not None
                half = len(b.records) // 2
                self._acc.put_back(b.tp, pieces or [b.records[:half], b.records[half:]])

    def _encode(self, taken: Mapping[Partition, list[Record]],
                sections: Mapping[Partition, Any] | None = None) -> dict[Partition, Batch]:
        """The batches taken, framed and compressed all at once: in parallel on all cores, the GIL released."""
        return seal(taken, sections, self._seq, codec=self.codec, level=self.level,
                    transactional=self.transactions is not None, now=time.monotonic())

    def _stamp_again(self, retry: Mapping[Partition, Batch]) -> dict[Partition, Batch]:
        """Batches to send again under a new producer id: records framed again, sections' batches restamped
        (their header and CRC; what is compressed stays)."""
        out = self._encode({tp: b.records for tp, b in retry.items() if b.section is None and b.records is not None})
        out.update(restamped({tp: b for tp, b in retry.items() if b.section is not None}, self._seq))
        return out

    def _record_sent(self, b: Batch) -> None:
        with self._lock:
            self._stats.sent(b.tp[0], len(b.payload), b.count, b.size)

    def _drop(self, batches: list[Batch], err: ProduceError) -> None:
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

    def _finish(self, done: list[Report]) -> None:
        if done:
            now = time.time()
            with self._lock:
                for _, b, _ in done:
                    b.reported = True
                    b.acked_at = now
                self._done.extend(done)
                self._delivered.notify_all()
