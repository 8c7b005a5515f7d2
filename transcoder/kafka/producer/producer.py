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

Its parts (this package, after aiokafka's producer/): the accumulator (what waits to be sent: records and
sections), the encoder (sealing with the codec and level), the sender (its thread and loop) and the Produce requests
(one round's requests, a handler per outcome of an answer), the sequences (the producer id, epoch and each
partition's sequence numbers), the guarantee chosen once (idempotent, or the transactions: the transactional calls,
over transaction_state's state machine and transaction_requests' coordinator requests), the reports (delivery
reports and statistics waiting for `poll`), the batches and the errors (ProduceError, made confluent_kafka's
KafkaError only where a caller reads it). This module is the caller's front: it builds the parts, hands each its
collaborators, and serves the reports to the callbacks.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError

from transcoder.codecs import Codec
from transcoder.errors import KafkaUnavailableError
from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.producer.accumulator import RecordAccumulator
from transcoder.kafka.producer.batches import Delivered, Headers
from transcoder.kafka.producer.encoder import BatchEncoder
from transcoder.kafka.producer.errors import NoAnswer, raises_kafka_exception
from transcoder.kafka.producer.guarantee import Guarantee, Idempotent
from transcoder.kafka.producer.reports import DeliveryReports
from transcoder.kafka.producer.requests import ProduceRequests
from transcoder.kafka.producer.sender import Sender
from transcoder.kafka.producer.sequences import ProducerSequences
from transcoder.kafka.producer.transaction_requests import TransactionRequests, Transactions
from transcoder.kafka.producer.transactions import TransactionSession
from transcoder.kafka.protocol import RawClient
from transcoder.kafka.retries import Backoff, KafkaErrors, retry_backoff_of
from transcoder.kafka.statistics import TopicProduce
from transcoder.pipeline.partitions import partition_for_key

DeliveryCallback = Callable[[KafkaError | None, Delivered], None]
#: a section's report: (error, topic, partition, base offset, section), once per batch
BatchCallback = Callable[[KafkaError | None, str, int, int, Any], None]


class BatchProducer:
    """The front: confluent_kafka.Producer's calls a lane uses, each handed to the part that owns it."""

    def __init__(self, librdkafka: Mapping[str, Any], *, codec: Codec, level: int | None, client_id: str,
                 linger_ms: int, max_bytes: int, max_records: int, on_delivery: DeliveryCallback,
                 on_stats: Callable[[dict[str, TopicProduce]], None] | None = None, stats_interval_ms: int = 5000,
                 on_batch: BatchCallback | None = None,
                 queue_max_bytes: int = 256 * 1024 * 1024, request_timeout_ms: int = 30_000,
                 delivery_timeout_ms: int = 300_000, retry_backoff_ms: int | None = None,
                 transactions: Transactions | None = None, errors: KafkaErrors | None = None,
                 client: RawClient | None = None, coordinator: RawClient | None = None) -> None:
        """`client`, `coordinator`: the Produce requests' connection and the transaction coordinators' (made from
        `librdkafka` when not given: a test hands in fakes)."""
        self.codec, self.level, self.client_id = codec, level, client_id
        self._failures = FailureLog(client_id)
        #: retry.backoff.ms and retry.backoff.max.ms: the cluster config's (Kafka's defaults, 100 ms and 1 s, where
        #: it sets none); `retry_backoff_ms` overrides the first
        base_ms, max_ms = retry_backoff_of(librdkafka)
        if retry_backoff_ms is not None:
            base_ms = retry_backoff_ms
        self._backoff_ms = (base_ms, max_ms)
        self._errors = errors
        timeout_s = request_timeout_ms / 1000
        self._info = client or RawClient({**librdkafka, "client.id": client_id}, timeout_s=timeout_s)
        #: the coordinators' connection, apart from the Produce requests': a broker throttling this client's
        #: produce rate (a quota) mutes the connection that carried them, and the commit must still get through
        self._coord = coordinator or (RawClient({**librdkafka, "client.id": client_id}, timeout_s=timeout_s)
                                      if transactions is not None else self._info)
        self._on_delivery, self._on_batch, self._on_stats = on_delivery, on_batch, on_stats
        #: topic -> the callback its records' reports go to instead (produce's on_delivery)
        self._topic_delivery: dict[str, DeliveryCallback] = {}
        self._partition_counts: dict[str, int] = {}
        #: when the batch whose report `on_batch` is being given was acknowledged (epoch seconds); 0: none yet
        self.reported_at = 0.0
        self._stats_interval = stats_interval_ms / 1000
        self._next_stats = time.monotonic() + self._stats_interval
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout = delivery_timeout_ms / 1000
        #: the one lock of the parts' shared state: the queue, the reports, the transaction's state
        self._lock = threading.Lock()
        #: the producer id, its epoch and each partition's next sequence (the sender's, and the epoch bump's)
        self.sequences = ProducerSequences()
        self.accumulator = RecordAccumulator(self._lock, client_id=client_id, max_bytes=max_bytes,
                                             max_records=max_records, linger_ms=linger_ms,
                                             queue_max_bytes=queue_max_bytes)
        self.reports = DeliveryReports(self._lock)
        self.transactions = transactions  # and the parts that depend on it (the setter)

    @property
    def transactions(self) -> Transactions | None:
        """exactly-once: this producer's transactions (None: idempotent only); set before it starts."""
        return self._transactions

    @transactions.setter
    def transactions(self, transactions: Transactions | None) -> None:
        """The parts, wired here: the guarantee is chosen once (the parts never ask which one they hold)."""
        self._transactions = transactions
        guarantee: Guarantee
        if transactions is None:
            self.transaction = None
            guarantee = Idempotent()
        else:
            #: exactly-once: the transaction (its state, moved under the lock by the caller's thread and the
            #: sender's; its requests, with where its coordinators are)
            self.transaction = guarantee = TransactionSession(
                TransactionRequests(transactions, self.client_id, self._failures, self._backoff_ms[0] / 1000),
                self._coord, lock=self._lock, sequences=self.sequences, accumulator=self.accumulator,
                reports=self.reports)
        self._guarantee = guarantee
        self.encoder = BatchEncoder(self.sequences, codec=self.codec, level=self.level,
                                    transactional=transactions is not None)
        #: the Produce requests: where the leaders are, how the last rounds went
        self.requests = ProduceRequests(
            self._info, client_id=self.client_id, sequences=self.sequences, accumulator=self.accumulator,
            encoder=self.encoder, reports=self.reports, failures=self._failures, guarantee=guarantee,
            request_timeout_ms=self._request_timeout_ms, delivery_timeout_s=self._delivery_timeout,
            backoff=Backoff(*self._backoff_ms), errors=self._errors)
        #: the first producer id (`start`): the idempotent producer's own, or the transactional id's
        self._first_producer_id: Callable[[float], None] = (
            self.requests.renew_producer_id if self.transaction is None
            else functools.partial(raises_kafka_exception(self.transaction.init), own=False))
        self.sender = Sender(client_id=self.client_id, accumulator=self.accumulator, encoder=self.encoder,
                             requests=self.requests, reports=self.reports, guarantee=guarantee,
                             request_timeout_ms=self._request_timeout_ms)

    # ------------------------------------------------------------------ the caller's side
    def start(self) -> None:
        """Connect, take a producer id and start the sender thread; KafkaUnavailableError if it cannot
        (within the request timeout). A transactional producer starts with `init_transactions`."""
        if self.sender.started:
            return
        self._first_producer_id(self._request_timeout_ms / 1000)
        self.sender.start()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1, *,
                timestamp: int = 0, headers: Headers | None = None,
                on_delivery: DeliveryCallback | None = None) -> None:
        """Queue one record (in a transactional producer: in the open transaction); BufferError when the queue is
        full (poll, then produce again). No `partition`: the key's, as librdkafka's default partitioner chooses.
        `on_delivery`: the reports of `topic`'s records go to it rather than the producer's callback (the offset
        map's records, written through the lane's producer)."""
        if not self.sender.started:
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
        self.accumulator.add((topic, partition), (key, value, headers, ts, size))

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
        if not self.sender.started:
            self.start()
        self.accumulator.add_sections((topic, partition), sections)

    def poll(self, timeout: float = 0) -> int:
        """Serve delivery reports (in this thread), waiting up to `timeout` seconds for the first one."""
        served = 0
        for failed, batch, base in self.reports.take(timeout):
            err = failed.as_kafka_error() if failed is not None else None
            topic, partition = batch.tp
            if batch.section is not None:
                assert self._on_batch is not None
                self.reported_at = batch.acked_at
                self._on_batch(err, topic, partition, base, batch.section)
            else:
                assert batch.records is not None
                report = self._topic_delivery.get(topic, self._on_delivery)
                for i, rec in enumerate(batch.records):
                    report(err, Delivered(topic, partition, base + i if base >= 0 else -1, rec))
            self.accumulator.served(batch)
            served += batch.count
        self._maybe_emit_stats()
        return served

    def flush(self, timeout: float | None = None) -> int:
        """Send everything held now (linger ignored) and serve its reports; return how many are left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.accumulator.flushing(True)
        try:
            while len(self) and not self.doomed:  # doomed: the caller aborts what is left
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.poll(0.1 if left is None else min(0.1, left))
        finally:
            self.accumulator.flushing(False)
        self.emit_statistics()
        return len(self)

    def __len__(self) -> int:
        return len(self.accumulator)  # held, in flight, or delivered with the report not yet served

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is held (bounded by `timeout`), stop the sender after its request in flight,
        close the connection. Records not delivered by then get no report: the lane never commits them."""
        self.flush(timeout)
        self.accumulator.close()
        self.sender.join()
        self._info.close()
        self._coord.close()

    # ------------------------------------------------------------------ transactions (the caller's side)
    @raises_kafka_exception
    def init_transactions(self, timeout: float) -> None:
        """Take this transactional id's producer id and epoch (fencing any earlier holder: the coordinator aborts
        what it left open) and start the sender. KafkaException as confluent_kafka's."""
        if self.transaction is None:
            raise RuntimeError(f"producer {self.client_id} has no transactional id")
        if not self.sender.started:
            self.transaction.init(timeout, own=False)
            self.sender.start()

    @raises_kafka_exception
    def begin_transaction(self) -> None:
        """A transaction begins with its first batch (the sender adds its partition): nothing to ask here. The
        open one is empty (after init_transactions, a commit or an abort); KafkaException if it failed."""
        self._transactional().begin()

    @raises_kafka_exception
    def send_offsets_to_transaction(self, offsets: Sequence[Any], group_metadata: Any, timeout: float) -> None:
        """Commit the consumer group's `offsets` (confluent_kafka TopicPartitions) with the open transaction.
        The group is this producer's `transactions.group_id`; `group_metadata` is the consumer's
        (`consumer_group_metadata()`), whose generation, member id and group instance id go with the offsets
        (KIP-447): the group coordinator refuses them from a member of an older generation, and the transaction
        must abort (a zombie's records are never committed). GroupMetadataError when it is not librdkafka's."""
        self._transactional().send_offsets(offsets, group_metadata, timeout)

    @raises_kafka_exception
    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every batch of the open transaction, then commit it (EndTxn). KafkaException (with
        txn_requires_abort) when it cannot commit: abort it."""
        transaction = self._transactional()
        limit = timeout if timeout is not None else self._request_timeout_ms / 1000
        deadline = time.monotonic() + limit
        left = self.flush(max(0.0, deadline - time.monotonic()))
        transaction.commit(left, limit, deadline)

    @raises_kafka_exception
    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop what the open transaction holds (queued, or waiting to be sent again; reports not yet served),
        abort it (EndTxn) and bump the epoch (KIP-588), so no batch of it can ever land later. KafkaException:
        fatal when another instance took the transactional id over."""
        transaction = self._transactional()
        transaction.abort(time.monotonic() + (timeout if timeout is not None else self._request_timeout_ms / 1000))

    @property
    def doomed(self) -> bool:
        """Whether the open transaction cannot commit any more (the caller aborts it)."""
        return self._guarantee.doomed

    def _transactional(self) -> TransactionSession:
        assert self.transaction is not None, "a transactional producer's call"
        return self.transaction

    # ------------------------------------------------------------------ statistics
    def _maybe_emit_stats(self) -> None:
        if self._on_stats is not None and time.monotonic() >= self._next_stats:
            self.emit_statistics()

    def emit_statistics(self) -> None:
        """Hand `on_stats` the batches sent since the last emission, now (the interval starts again)."""
        if self._on_stats is None:
            return
        self._next_stats = time.monotonic() + self._stats_interval
        self._on_stats(self.reports.statistics())
