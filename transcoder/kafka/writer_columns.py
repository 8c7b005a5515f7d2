"""The writer's column path: a run of one source partition's records given as columns (the Spark engine's
executors hold Arrow columns), produced to every destination of its topic as `Writer.write` produces records."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import KafkaException

from transcoder.kafka.writer import Writer
from transcoder.kafka.writer_failures import Failure, Record


def write_columns(writer: Writer, topic: str, partition: int, offsets: Sequence[int], keys: Sequence[bytes | None],
                  values: Sequence[bytes | None], headers: Sequence[list[tuple[str, bytes | None]] | None],
                  stamps: Sequence[int], sizes: Sequence[int], record_at: Callable[[int], Record]) -> None:
    """Produce a run of one source partition's records, given as columns (in offset order), to every
    destination of `topic`: what `Writer.write` does per record, without a record object per record (the
    Spark engine's executors hold Arrow columns). `record_at(i)` builds record i where one is needed:
    a record the producer refuses at once, for the dead-letter topic or the error.
    """
    ledger = writer.ledger
    dests = writer.routes[topic]
    entries = list(zip(offsets, sizes, stamps, strict=True))  # the timestamp: a failed report carries none
    n = len(entries)
    done = [0] * len(dests)  # per destination: entries[:done[d]] are registered with the ledger
    failed: set[tuple[int, int]] = set()  # (destination index, record index) the producer refused

    def register(upto: list[int]) -> None:
        chunk, nbytes = {}, 0
        for d, (_, dest) in enumerate(dests):
            part = [e for i, e in enumerate(entries[done[d]:upto[d]], done[d]) if (d, i) not in failed] \
                if failed else entries[done[d]:upto[d]]
            if part:
                chunk[(dest, partition)] = part
                nbytes += sum(e[1] for e in part)
            done[d] = upto[d]
        ledger.sent(chunk, nbytes)

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
                        register([i + 1 if e < d else i for e in range(len(dests))])
                        writer.poll(0.05)
                        continue
                    except KafkaException as exc:
                        e = exc.args[0]
                        ledger.hold((topic, partition), offsets[i])
                        failed.add((d, i))
                        writer.failures.append(Failure((topic, partition), offsets[i], dest, e.name(), e.str(),
                                                     record_at(i)))
                    break
        complete = True
    finally:  # also on an error: reports of what was produced must find it
        i, d = at
        register([n] * len(dests) if complete else [i + 1 if e < d else i for e in range(len(dests))])
        last = n if complete else i
        if last:
            ledger.consumed({(topic, partition): offsets[last - 1]})
