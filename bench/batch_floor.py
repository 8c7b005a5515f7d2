"""The batch-level copy, measured before it becomes the lane (issue 15): raw Fetch -> native decode and
re-batch -> native seal (compression, CRC) -> raw Produce, with no record object per record anywhere.

`python -m bench.batch_floor BOOTSTRAP SOURCE DESTINATION CODEC RECORDS MAX_BYTES LINGER_MS`

Like bench/native_floor it copies `RECORDS` records of every partition of SOURCE faithfully (key, value,
headers, timestamp, partition; batching by MAX_BYTES uncompressed and LINGER_MS) with an idempotent producer
(acks=all), and exits once all are acknowledged; it commits no offsets and keeps no ledger or metrics. One
thread fetches, decodes and re-batches; another seals (in parallel, the GIL released) and produces.
"""

from __future__ import annotations

import queue
import sys
import threading
import time

import transcoder_native as native

from transcoder.kafka.protocol import RawClient

FETCH_MAX_BYTES = 16 * 1024 * 1024


def main(bootstrap: str, source: str, dest: str, codec: str, records: int, max_bytes: int, linger_ms: int) -> None:
    conf = {"bootstrap.servers": bootstrap, "client.id": "batch-floor"}
    fetcher, producer = RawClient(conf), RawClient(conf)
    leaders = {p: leader for (t, p), leader in fetcher.leaders([source]).items() if t == source}
    dest_leaders = {p: leader for (t, p), leader in producer.leaders([dest]).items() if t == dest}
    code, pid, epoch = producer.init_producer_id()
    if code:
        raise SystemExit(f"InitProducerId: error {code}")
    sealed: queue.Queue = queue.Queue(maxsize=8)
    acked = [0]
    failed: list[str] = []

    def send() -> None:
        seq: dict[int, int] = {}
        while True:
            item = sealed.get()
            if item is None:
                return
            parts = item  # partition -> [sections]
            flat = [(p, s) for p, secs in parts.items() for s in secs]
            stamps = []
            for p, s in flat:
                stamps.append((pid, epoch, seq.get(p, 0)))
                seq[p] = seq.get(p, 0) + len(s)
            batches = native.seal_sections([s for _, s in flat], stamps, codec=codec)
            # one Produce per round, one batch per partition in it (Produce takes one record set per partition)
            pending = list(zip(flat, batches, strict=False))
            while pending:
                round_, rest, seen = {}, [], set()
                for (p, s), b in pending:
                    if p in seen:
                        rest.append(((p, s), b))
                    else:
                        seen.add(p)
                        round_[(dest, p)] = (b, len(s))
                by_leader: dict[int, dict] = {}
                for tp, (b, _) in round_.items():
                    by_leader.setdefault(dest_leaders[tp[1]], {})[tp] = b
                for leader, group in by_leader.items():
                    answers = producer.produce(group, leader=leader)
                    for tp, (err, _) in answers.items():
                        if err:
                            failed.append(f"{tp}: error {err}")
                            return
                        acked[0] += round_[tp][1]
                pending = rest

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    positions = dict.fromkeys(leaders, 0)
    rebatchers = {p: native.Rebatcher(max_bytes, 10_000) for p in leaders}
    opened: dict[int, float] = {}
    read = 0
    while read < records and not failed:
        for p, pos in positions.items():
            part = fetcher.fetch_partition(source, p, pos, leader=leaders[p], max_bytes=FETCH_MAX_BYTES)
            aborted = [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or [])]
            got = native.decode_stored(part.records or b"", pos, aborted)
            positions[p] = got.next_offset
            if len(got):
                opened.setdefault(p, time.monotonic())
                rebatchers[p].add(got, int(time.time() * 1000))
                read += len(got)
        now = time.monotonic()
        out = {}
        for p, rb in rebatchers.items():
            flush = read >= records or (p in opened and now - opened[p] >= linger_ms / 1000)
            secs = rb.take(flush)
            if rb.records == 0:
                opened.pop(p, None)
            if secs:
                out[p] = secs
        if out:
            sealed.put(out)
    sealed.put(None)
    sender.join()
    if failed:
        raise SystemExit(f"produce failed: {failed[0]}")
    print(f"copied {acked[0]} records", file=sys.stderr)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6]))
