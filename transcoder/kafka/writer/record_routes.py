"""The records path of a sink: each source record produced to every destination of its topic, through each
destination's `produce`, as records (confluent_kafka.Message, or anything with the same accessors) or as a run of
columns (the Spark engine's executors hold Arrow columns). The ledger is told once per call, and before any
delivery report can run (a full local queue is polled)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, Message

from transcoder.kafka.writer.failures import Failure, Failures, Record
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.partitions import Partition

#: A destination's produce call: (topic, value, key, partition, timestamp=, headers=)
Produce = Callable[..., None]


class RecordRoutes:
    """Source topic -> [(produce, destination topic)] of one lane; `poll(timeout)` serves delivery reports (the
    sink's own poll) while a producer's local queue is full."""

    def __init__(self, sources: Iterable[str], ledger: Ledger, failures: Failures,
                 poll: Callable[[float], None]) -> None:
        self.routes: dict[str, list[tuple[Produce, str]]] = {s: [] for s in sources}
        self.ledger = ledger
        self.failures = failures
        self.poll = poll

    def clear(self) -> None:
        """No destination takes records any more (a transactional producer replaced)."""
        for routes in self.routes.values():
            routes.clear()

    def write(self, msgs: Iterable[Record | Message], on_error: Callable[[KafkaError], None]) -> tuple[int, int]:
        """Produce each record to every destination of its topic; return (records, bytes) taken.

        A few C calls per record and destination; the ledger is told once per call (`sent`,
        `consumed`), and before any delivery report can run (a full local queue is polled).
        Records carrying a consumer error go to `on_error` instead.
        """
        ledger = self.ledger
        routes_of = self.routes
        failed = self.failures.records
        records = cast("Iterable[Record]", msgs)  # consumed records without an error have topic, partition, offset
        chunk: dict[Partition, list[tuple[int, ...]]] = {}
        last: dict[Partition, int] = {}
        sent_bytes = in_bytes = n = 0
        try:
            for m in records:
                err = m.error()
                if err is not None:
                    on_error(err)
                    continue
                topic = m.topic()
                partition = m.partition()
                offset = m.offset()
                key = m.key()
                value = m.value()
                headers = m.headers()
                ts_type, ts = m.timestamp()
                if ts_type == TIMESTAMP_NOT_AVAILABLE:
                    ts = 0
                size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
                if headers:
                    for h_key, h_value in headers:
                        size += len(h_key) + (len(h_value) if h_value is not None else 0)
                in_bytes += size
                entry = (offset, size, ts)  # the timestamp: a failed report carries none (Deliveries)
                for produce, dest in routes_of[topic]:
                    while True:
                        try:
                            produce(dest, value, key, partition, timestamp=ts, headers=headers)
                        except BufferError:
                            # The local queue is full: wait for deliveries, whose reports pop what was sent.
                            ledger.sent(chunk, sent_bytes)
                            chunk = {}
                            sent_bytes = 0
                            self.poll(0.05)
                            continue
                        except KafkaException as exc:
                            e = exc.args[0]
                            ledger.hold((topic, partition), offset)
                            failed.append(Failure((topic, partition), offset, dest, e.name(), e.str(), m))
                        else:
                            q = chunk.get((dest, partition))
                            if q is None:
                                q = chunk[(dest, partition)] = []
                            q.append(entry)
                            sent_bytes += size
                        break
                last[(topic, partition)] = offset
                n += 1
        finally:  # also when on_error raises: reports of what was produced must find it
            ledger.sent(chunk, sent_bytes)
            ledger.consumed(last)
        return n, in_bytes

    def write_columns(self, topic: str, partition: int, offsets: Sequence[int], keys: Sequence[bytes | None],
                      values: Sequence[bytes | None], headers: Sequence[Sequence[tuple[str, bytes | None]] | None],
                      stamps: Sequence[int], sizes: Sequence[int], record_at: Callable[[int], Record]) -> None:
        """Produce a run of one source partition's records, given as columns (in offset order), to every
        destination of `topic`: what `write` does per record, without a record object per record (the
        Spark engine's executors hold Arrow columns). `record_at(i)` builds record i where one is needed:
        a record the producer refuses at once, for the dead-letter topic or the error.
        """
        dests = self.routes[topic]
        # the timestamp: a failed report carries none
        entries: list[tuple[int, ...]] = list(zip(offsets, sizes, stamps, strict=True))
        n = len(entries)
        run = _ColumnsProduced(self.ledger, dests, partition, entries)
        at = (0, 0)  # (record, destination) being produced: what precedes it is produced
        complete = False
        try:
            for i in range(n):
                value, key, hdrs, ts = values[i], keys[i], headers[i], stamps[i]
                for d, (produce, dest) in enumerate(dests):
                    at = (i, d)
                    while True:
                        try:
                            produce(dest, value, key, partition, timestamp=ts, headers=hdrs)
                        except BufferError:
                            # The local queue is full: register what was produced, then wait for deliveries.
                            run.register_before(i, d)
                            self.poll(0.05)
                            continue
                        except KafkaException as exc:
                            e = exc.args[0]
                            self.ledger.hold((topic, partition), offsets[i])
                            run.failed.add((d, i))
                            self.failures.records.append(Failure((topic, partition), offsets[i], dest, e.name(),
                                                                 e.str(), record_at(i)))
                        break
            complete = True
        finally:  # also on an error: reports of what was produced must find it
            i, d = at
            if complete:
                run.register([n] * len(dests))
            else:
                run.register_before(i, d)
            last = n if complete else i
            if last:
                self.ledger.consumed({(topic, partition): offsets[last - 1]})


class _ColumnsProduced:
    """What of a run of columns each destination produced and the ledger was told (`done`)."""

    def __init__(self, ledger: Ledger, dests: Sequence[tuple[Any, str]], partition: int,
                 entries: list[tuple[int, ...]]) -> None:
        self.ledger = ledger
        self.dests = dests
        self.partition = partition
        self.entries = entries
        self.done = [0] * len(dests)  # per destination: entries[:done[d]] are registered with the ledger
        self.failed: set[tuple[int, int]] = set()  # (destination index, record index) the producer refused

    def register_before(self, i: int, d: int) -> None:
        """Register what was produced before record `i` went to destination `d`."""
        self.register([i + 1 if e < d else i for e in range(len(self.dests))])

    def register(self, upto: list[int]) -> None:
        chunk: dict[Partition, list[tuple[int, ...]]] = {}
        nbytes = 0
        entries, done, failed = self.entries, self.done, self.failed
        for d, (_, dest) in enumerate(self.dests):
            part = [e for i, e in enumerate(entries[done[d]:upto[d]], done[d]) if (d, i) not in failed] \
                if failed else entries[done[d]:upto[d]]
            if part:
                chunk[(dest, self.partition)] = part
                nbytes += sum(e[1] for e in part)
            done[d] = upto[d]
        self.ledger.sent(chunk, nbytes)
