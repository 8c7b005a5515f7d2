"""Raw Fetches of a lane's partitions: the records as the broker stores them, decoded by the compiled part
(transcoder_native.decode_stored) without a record object per record.

One Fetch request per leader per round, all leaders at once, read_committed (aborted transactions and markers
are left out as a Java consumer leaves them out), waiting up to `max_wait_ms` for `min_bytes` (librdkafka's
fetch.wait.max.ms and fetch.min.bytes). Positions are the fetcher's own: the caller sets them (committed offsets,
or the reset policy's) and they advance past every whole batch read, control and aborted batches included.

Read-ahead: as soon as a round's answers are decoded, the next round's Fetches are sent (from the new positions,
within what is left of the round's budget), so the broker and kafka-python's I/O thread serve them while the
caller hands the records on. The next round takes their answers if they ask for every partition it wants, from the
offsets it wants them from; else (a seek, a partition assigned or resumed meanwhile) they are dropped, unread.
Measured on one lane (3M nginx records, one partition, lz4): the lane waited 5.4 ms per 1 MiB Fetch and spent
another ~0.7 ms per round handing the records on, during which no Fetch was in flight.

Group membership and commits stay with the lane's consumer; this only reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from transcoder.codecs import decode_stored
from transcoder.errors import KafkaUnavailableError, TranscoderError
from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.protocol import PendingFetch, RawClient
from transcoder.kafka.retries import KAFKA_ERRORS, Backoff, KafkaErrors, kafka_error_name, retry_backoff_of
from transcoder.pipeline.partitions import Partition

log = structlog.get_logger("transcoder.fetcher")

#: Fetch errors after which the partition's leader is looked up again (Kafka's error names), and the partition
#: fetched again after its back-off (retry.backoff.ms doubling to retry.backoff.max.ms).
_STALE_LEADER = frozenset({"NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION",
                           "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "LEADER_NOT_AVAILABLE",
                           "KAFKA_STORAGE_ERROR", "OFFSET_NOT_AVAILABLE"})
#: Backoff keys of what is not per partition: the metadata request, and a broker's whole Fetch.
_METADATA = "metadata"


#: A round of Fetches runs on the lane's thread: while Kafka is unreachable or stalled it gives up after this long
#: (beyond fetch.wait.max.ms), so the lane still commits, reports and stops in time; the next round asks again.
REQUEST_TIMEOUT_MS = 3_000


@dataclass
class _Ahead:
    """The next round's Fetches, sent before it: the offsets asked, and the requests."""

    offsets: dict[Partition, int]
    pending: PendingFetch


@dataclass(frozen=True)
class SourceLoss:
    """Records of a source partition gone before the lane read them: the next offset it needed (`offset`) is out
    of the partition's range. `first` is the partition's first offset now (its low watermark); below `offset` when
    the partition ends before the lane's position (truncated, or the topic deleted and recreated): how many
    records were lost is then unknown."""

    topic: str
    partition: int
    offset: int
    first: int
    #: the partition's end when the loss was found
    end: int
    #: the topic deleted and recreated under the same name: its id before and now (else both empty)
    topic_id: str = ""
    new_topic_id: str = ""
    #: recreated: the old topic's last end the lane saw (-1: never seen)
    seen_end: int = -1
    #: recreated, found at start from the offset map (the old topic's id not known): `offset` is one past the
    #: newest source offset the map holds
    by_map: bool = False

    @property
    def recreated(self) -> bool:
        return bool(self.topic_id)

    @property
    def records(self) -> int | None:
        """How many records were lost (None: unknown). Recreated: the old topic's last end seen minus the lane's
        position (records written to the old topic after that end are not known); else None when the partition
        starts again below the position."""
        if self.recreated:
            return max(0, self.seen_end - self.offset) if self.seen_end >= 0 else None
        return self.first - self.offset if self.first >= self.offset else None


@dataclass
class Fetched:
    """What one round of Fetches brought for one partition."""

    records: Any  # transcoder_native.StoredRecords
    #: the partition's read_committed end (last stable offset) as the broker answered
    end: int


def _size(librdkafka: Mapping[str, Any], name: str, default: int) -> int:
    """A Fetch size property of the cluster's config (a whole number of bytes, at least 1), or its default."""
    value = librdkafka.get(name, default)
    try:
        size = int(value)
        if size == float(value) and size >= 1 and not isinstance(value, bool):
            return size
    except (TypeError, ValueError):
        pass
    raise TranscoderError(f"cluster config {name}: {value!r} is not a whole number of bytes of at least 1")


class Fetcher:
    def __init__(self, librdkafka: Mapping[str, Any], client_id: str, *, max_wait_ms: int = 500,
                 reset: str = "earliest", request_timeout_ms: int = REQUEST_TIMEOUT_MS,
                 read_ahead: bool = True, past_loss: bool = False, errors: KafkaErrors | None = None) -> None:
        """`librdkafka`: the cluster's client properties; a Fetch's sizes are its `fetch.max.bytes`,
        `max.partition.fetch.bytes` and `fetch.min.bytes` where the config sets them (librdkafka's and Java's
        defaults, 50 MiB, 1 MiB and 1, where it does not), as the records path's librdkafka consumer takes them.
        `past_loss`: where records the lane needs are gone (SourceLoss), fetch on from the partition's first
        record (on_source_loss: continue); else its position stays at the gap (the lane stops). Either way the
        loss is in `losses` for the caller.

        A Fetch that fails is tried again after a back-off, as Kafka's consumer does (KIP-580): the cluster
        config's `retry.backoff.ms` doubling to `retry.backoff.max.ms` (100 ms and 1 s by default), +-20%; per
        broker for a Fetch not answered (the other brokers' partitions are fetched meanwhile), per partition for a
        partition's error, once for the metadata request. Each error is counted by name in `errors` (the
        process's KAFKA_ERRORS by default: transcoder_kafka_errors_total) and logged per partition and error at
        most once per 30 s (FailureLog)."""
        self.client_id = client_id
        #: send the next round's Fetches as soon as a round is decoded (module doc)
        self.read_ahead = read_ahead
        self._ahead: _Ahead | None = None
        self._info = RawClient({**librdkafka, "client.id": client_id}, timeout_s=request_timeout_ms / 1000)
        self.max_bytes = _size(librdkafka, "fetch.max.bytes", 52_428_800)
        self.partition_max_bytes = _size(librdkafka, "max.partition.fetch.bytes", 1_048_576)
        self.min_bytes = _size(librdkafka, "fetch.min.bytes", 1)
        self.max_wait_ms = max_wait_ms
        if reset not in ("earliest", "latest"):
            raise TranscoderError(f"auto.offset.reset must be earliest or latest, not {reset!r}")
        self.reset = reset
        #: source partition -> the next offset to fetch, in the order the next Fetch asks for them: the broker fills a
        #: Fetch's max_bytes in that order (KIP-74), so a partition that brought records goes to the end, as the
        #: Java consumer moves it; else a budget smaller than the first partition's backlog would all go to it, round
        #: after round, while the others wait
        self.positions: dict[Partition, int] = {}
        self.paused: set[Partition] = set()
        #: partitions to start at their "earliest" or "latest" offset, not asked of the broker yet
        self._unresolved: dict[Partition, str] = {}
        self._leaders: dict[Partition, int] = {}
        self._failures = FailureLog(client_id, logger=log)
        self._backoff = Backoff(*retry_backoff_of(librdkafka))
        self._errors = KAFKA_ERRORS if errors is None else errors
        self.past_loss = past_loss
        #: losses found since the caller last took them (`take_losses`)
        self.losses: list[SourceLoss] = []
        #: topics a Fetch found unknown (deleted, perhaps recreated) since the caller last looked: it checks their ids
        self.unknown_topics: set[str] = set()

    def take_losses(self) -> list[SourceLoss]:
        out, self.losses = self.losses, []
        return out

    # ------------------------------------------------------------------ positions
    def assign(self, positions: Mapping[Partition, int | str | None]) -> None:
        """Start fetching these partitions at these offsets: an offset, "earliest" or "latest" (asked of the
        broker before the partition's first Fetch), or None (the reset policy's)."""
        for tp, off in positions.items():
            if isinstance(off, int) and off >= 0:
                self._unresolved.pop(tp, None)
                self.positions[tp] = off
            else:
                self._unresolved[tp] = off if isinstance(off, str) else self.reset
                self.positions.pop(tp, None)
        if self._unresolved:
            self._resolve()

    def _resolve(self) -> None:
        """Positions at the earliest or latest offset; while Kafka does not answer, logged with back-off and asked
        again at the next round."""
        for where in ("earliest", "latest"):
            tps = sorted(tp for tp, w in self._unresolved.items() if w == where)
            if not tps:
                continue
            if not self._backoff.ready("list_offsets", time.monotonic()):
                return
            try:
                starts = self._info.list_offsets(tps, latest=where == "latest")
                self._failures.succeeded("list_offsets_failed", time.monotonic())
                self._backoff.succeeded("list_offsets")
            except KafkaUnavailableError as exc:
                now = time.monotonic()
                self._backoff.failed("list_offsets", now)
                name = kafka_error_name(exc)
                self._errors.count(name, topic=exc.topic or "", now=now)
                self._failures.failed("list_offsets_failed", now, error=name, detail=str(exc))
                return
            for tp, off in starts.items():
                if tp in self._unresolved:
                    self.positions[tp] = off
                    del self._unresolved[tp]

    def revoke(self, partitions: Iterable[Partition]) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)
            self.paused.discard(tp)
            self._unresolved.pop(tp, None)

    # ------------------------------------------------------------------ fetching
    def fetch(self, budget: int | None = None, skip: Collection[Partition] = (),
              until: float | None = None) -> dict[Partition, Fetched]:
        """One round: a Fetch to each leader of the partitions not paused, at once; the partitions' records
        from their positions, decoded, and the positions moved past them. Waits up to max_wait_ms when
        nothing is there. A partition whose leader moved is looked up again at the next round.

        `budget`: at most this many bytes per response and partition (the caller's room for records in flight;
        the broker still returns a first batch larger than that, so a partition always moves on). `skip`:
        partitions not to fetch this round (the caller still holds records of theirs). `until` (monotonic s): the
        broker waits for records no later than this (the caller has a batch to send by then: its linger), each Fetch
        this round sends, the one it reads ahead too, asking for what is left of it when sent (at most max_wait_ms).
        """
        if self._unresolved:
            self._resolve()
        wanted = {tp: off for tp, off in self.positions.items() if tp not in self.paused and tp not in skip}
        if not wanted:
            return {}
        now = time.monotonic()
        missing = {t for t, p in wanted if self._leaders.get((t, p), -1) < 0}
        if missing and self._backoff.ready(_METADATA, now):
            self._ask_leaders(missing, now)
        by_leader = self._by_leader(wanted, now)
        if not by_leader:  # every partition waits: for its leader, or its back-off
            self._wait(wanted, now, until)
            return {}
        cap = self.max_bytes if budget is None else max(1, min(self.max_bytes, budget))
        answers = self._answers(by_leader, cap, until)
        now = time.monotonic()
        leader_of = {tp: leader for leader, offsets in by_leader.items() for tp in offsets}
        out: dict[Partition, Fetched] = {}
        fetched = 0
        for tp, part in answers.items():
            offset = wanted.get(tp)
            if offset is None:  # read ahead for a partition this round does not want: dropped unread
                continue
            fetched += len(part.records or b"")
            taken = self._take(tp, part, offset, leader_of.get(tp), now)
            if taken is not None:
                out[tp] = taken
        left = cap - fetched
        if self.read_ahead and left >= min(cap, self.partition_max_bytes):
            self._read_ahead(left, skip, until)
        return out

    def _answers(self, by_leader: Mapping[int, Mapping[Partition, int]], cap: int, until: float | None
                 ) -> dict[Partition, Any]:
        """This round's answers by partition (from the read-ahead where usable); each leader's Fetch noted: failed
        (backed off, counted) or answered (its back-off and failure log cleared)."""
        ahead, self._ahead = self._ahead, None
        try:
            if ahead is not None and _usable(ahead, by_leader):
                pending = ahead.pending
            else:  # what was read ahead (if anything) is dropped unread: positions moved, partitions came back
                pending = self._start(by_leader, cap, until)
            answers, failed = self._info.fetch_results(pending)
        except KafkaUnavailableError as exc:  # no connection at all (Kafka not reached at start)
            answers, failed = {}, dict.fromkeys(by_leader, exc)
        now = time.monotonic()
        for leader, error in failed.items():
            self._leader_failed(leader, by_leader.get(leader, {}), error, now)
        for leader, offsets in by_leader.items():
            if leader not in failed and any(tp in answers for tp in offsets):
                self._backoff.succeeded(("broker", leader))
                self._failures.succeeded("fetch_request_failed", now, key=(leader,))
        return answers

    def _take(self, tp: Partition, part: Any, offset: int, leader: int | None, now: float) -> Fetched | None:
        """A partition's records, its position moved past them; None where it answered an error (`_fetch_error`)."""
        if part.error_code:
            self._fetch_error(tp, offset, part.error_code, leader)
            return None
        self._backoff.succeeded(tp)
        self._failures.succeeded("fetch_partition_failed", now, key=tp)
        records, end = _decoded(tp, part, offset)
        if tp in self.positions:  # not revoked meanwhile
            if len(records):  # to the end of the next request's order (below)
                del self.positions[tp]
            self.positions[tp] = records.next_offset
        return Fetched(records, end)

    def _ask_leaders(self, topics: set[str], now: float) -> None:
        """The leaders of `topics`' partitions, asked of Kafka (every connection's broker list follows the answer:
        RawClient.leaders); a failure is counted, logged with back-off, and asked again after the metadata's."""
        try:
            self._leaders.update(self._info.leaders(topics))
        except Exception as exc:  # noqa: BLE001 - kafka-python's errors: counted, logged with back-off, asked again
            self._backoff.failed(_METADATA, now)
            name = kafka_error_name(exc)
            self._errors.count(name, now=now)
            self._failures.failed("metadata_request_failed", now, error=name, detail=repr(exc))
            return
        self._backoff.succeeded(_METADATA)
        self._failures.succeeded("metadata_request_failed", now)

    def _by_leader(self, wanted: Mapping[Partition, int], now: float) -> dict[int, dict[Partition, int]]:
        """The partitions to fetch now, by leader: those with a known leader, neither backed off (the partition, or
        its leader's whole Fetch)."""
        by_leader: dict[int, dict[Partition, int]] = {}
        for tp, off in wanted.items():
            leader = self._leaders.get(tp, -1)
            if leader >= 0 and self._backoff.ready(("broker", leader), now) and self._backoff.ready(tp, now):
                by_leader.setdefault(leader, {})[tp] = off
        return by_leader

    def _wait(self, wanted: Collection[Partition], now: float, until: float | None) -> None:
        """Nothing to fetch now (every partition backed off, or its leader unknown): wait until the first may be
        tried again, no longer than a Fetch would (max_wait_ms, or `until`), so the caller's loop neither spins
        nor waits past its own duties."""
        keys: list[Any] = [_METADATA]
        for tp in wanted:
            leader = self._leaders.get(tp, -1)
            keys += [tp, ("broker", leader)] if leader >= 0 else []
        waits = [w for k in keys if (w := self._backoff.wait(k, now)) > 0]
        pause = min(waits) if waits else self._backoff.base_ms / 1000
        pause = min(pause, self.max_wait_ms / 1000, max(0.0, until - now) if until is not None else math.inf)
        if pause > 0:
            time.sleep(pause)

    def _leader_failed(self, leader: int, offsets: Mapping[Partition, int], exc: BaseException, now: float) -> None:
        """A broker did not answer its Fetch (down, unreachable, unknown to the broker list): its partitions' leaders
        are looked up again and it is backed off; counted per topic, logged per broker and error."""
        self._backoff.failed(("broker", leader), now)
        name = kafka_error_name(exc)
        topics: dict[str, list[int]] = {}
        for t, p in offsets:
            self._leaders.pop((t, p), None)
            topics.setdefault(t, []).append(p)
        for t, ps in topics.items():
            self._errors.count(name, topic=t, broker=leader, partitions=ps, now=now)
        self._failures.failed("fetch_request_failed", now, key=(leader,), broker=leader, error=name,
                              partitions=show_partitions(offsets), detail=f"{type(exc).__name__}: {exc}")

    def _start(self, by_leader: Mapping[int, Mapping[Partition, int]], cap: int,
               until: float | None) -> PendingFetch:
        wait_ms = self.max_wait_ms if until is None else \
            max(0, min(self.max_wait_ms, math.ceil((until - time.monotonic()) * 1000)))
        return self._info.fetch_start(by_leader, max_bytes=cap,
                                      partition_max_bytes=min(self.partition_max_bytes, cap),
                                      max_wait_ms=wait_ms, min_bytes=self.min_bytes)

    def _read_ahead(self, budget: int, skip: Collection[Partition], until: float | None) -> None:
        """The next round's Fetches, sent now: from the positions just moved, at most `budget` bytes, for the
        partitions with a known leader not paused or skipped. If they cannot be sent, the next round sends its own
        (and logs why they fail)."""
        by_leader = self._by_leader({tp: off for tp, off in self.positions.items()
                                     if tp not in self.paused and tp not in skip}, time.monotonic())
        if not by_leader:
            return
        try:
            pending = self._start(by_leader, budget, until)
        except KafkaUnavailableError:
            return
        self._ahead = _Ahead({tp: off for offsets in by_leader.values() for tp, off in offsets.items()}, pending)

    def _fetch_error(self, tp: Partition, offset: int, code: int, leader: int | None) -> None:
        name = kafka_error_name(code)
        if name in _STALE_LEADER:
            now = time.monotonic()
            self._leaders.pop(tp, None)
            self._backoff.failed(tp, now)
            self._errors.count(name, topic=tp[0], broker=leader, partitions=[tp[1]], now=now)
            if name == "UNKNOWN_TOPIC_OR_PARTITION":
                self.unknown_topics.add(tp[0])
            self._failures.failed("fetch_partition_failed", now, key=(*tp, name), topic=tp[0], partition=tp[1],
                                  broker=leader, error=name)
            return
        if name == "OFFSET_OUT_OF_RANGE":
            # The records from `offset` are gone (retention, DeleteRecords: below the first offset now) or the
            # partition ends before it (truncated, or the topic deleted and recreated): a loss, for the caller to
            # log, count, mark and act on. With past_loss the partition is read on from its first record.
            try:
                (first,) = self._info.list_offsets([tp], latest=False).values()
                (end,) = self._info.list_offsets([tp], latest=True).values()
            except KafkaUnavailableError as exc:  # asked again at the next round
                name = kafka_error_name(exc)
                self._errors.count(name, topic=tp[0], partitions=[tp[1]], now=time.monotonic())
                self._failures.failed("list_offsets_failed", time.monotonic(), error=name,
                                      detail=str(exc))
                return
            if first <= offset <= end:  # in range again (the answer raced a leader change): fetch again
                return
            self.losses.append(SourceLoss(tp[0], tp[1], offset, first, end))
            if self.past_loss and tp in self.positions:
                self.positions[tp] = first
            else:  # the caller stops: not fetched again meanwhile
                self.paused.add(tp)
            return
        raise TranscoderError(f"fetching {tp[0]} [{tp[1]}] offset {offset}: {name}", topic=tp[0], partition=tp[1],
                              offset=offset, kafka_error=name)

    def connect(self) -> None:
        """Open the connection now, so that its I/O thread is started (and counted) as its owner's. Kafka
        unreachable is not an error here: the first fetch tries again, and logs it."""
        try:
            self._info.connect()
        except KafkaUnavailableError:
            pass

    def close(self) -> None:
        self._ahead = None
        self._info.close()


def _usable(ahead: _Ahead, by_leader: Mapping[int, Mapping[Partition, int]]) -> bool:
    """The Fetches read ahead answer this round: they ask for every partition it would ask for, each from the
    same offset (a partition they hold and it does not want is left unread)."""
    return all(ahead.offsets.get(tp) == off for offsets in by_leader.values() for tp, off in offsets.items())


def _decoded(tp: Partition, part: Any, offset: int) -> tuple[Any, int]:
    """A partition's answer fetched from `offset`: its records, decoded, and the end a consumer reading committed
    records sees (the last stable offset, else the high watermark)."""
    aborted = [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or ())]
    try:
        records = decode_stored(part.records or b"", offset, aborted)
    except ValueError as exc:
        raise TranscoderError(f"{tp[0]} [{tp[1]}] {exc}: stored data transcoder cannot read",
                              topic=tp[0], partition=tp[1], offset=offset) from None
    return records, part.last_stable_offset if part.last_stable_offset >= 0 else part.high_watermark


def show_partitions(offsets: Iterable[Partition]) -> str:
    """`t [0,2]; u [1]`: partitions by topic, for a log line."""
    topics: dict[str, list[int]] = {}
    for t, p in offsets:
        topics.setdefault(t, []).append(p)
    return "; ".join(f"{t} [{','.join(map(str, sorted(ps)))}]" for t, ps in sorted(topics.items()))
