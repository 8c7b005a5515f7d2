"""A lane's watch over its sources: topics deleted and recreated (topic ids, KIP-516), and records lost before they
were copied (retention or DeleteRecords overtaking the lane, a recreated topic, a recreation found from the offset
map between runs). Every loss is one line naming topic, partition and offsets, counted in
transcoder_source_records_lost_total where the count is known, marked in the offset map (verify and cutover see the
gap), and per on_source_loss stops the lane (`error`, raised once the lane committed what it copied) or goes on.

Between runs (the lane stopped, the topic deleted and recreated, Kafka deleting the group's offsets with it): a
partition assigned with no committed offset whose offset map holds copies made from another topic id than the
topic's now, or from no recorded id, is such a loss (`recreated_by_map`). The watch tells the offset map's recorder
the sources' ids, so that the runs it stores name the topic they copy.

It also tells what an error the consumer reports means (`consumer_error`). Runs on the lane's thread, with the
collaborators it is handed: the partition book (what the lane holds, where it is, what it saw), the copy path it
holds and restarts partitions through (`Reader`), the checkpoint that restarts a partition's commits.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from confluent_kafka import KafkaError

from transcoder.engine.source_loss import report_loss
from transcoder.errors import DataLossError, TopicError, TranscoderError
from transcoder.kafka import offset_map_topic as offset_map
from transcoder.kafka.fetcher import SourceLoss
from transcoder.kafka.topic_ids import GONE, TopicIds
from transcoder.pipeline.offset_runs import Recreation, ReplacedSource, replaced_source
from transcoder.pipeline.partition_book import PartitionBook
from transcoder.pipeline.partitions import Partition, show

if TYPE_CHECKING:
    from transcoder.config import Config
    from transcoder.metrics.registry import LaneMetrics

log = structlog.get_logger("transcoder.lane")


class Reader(Protocol):
    """What the watch asks of the lane's copy path (copy_paths.CopyPath)."""

    def hold(self, tps: set[Partition], hold: bool) -> None: ...
    def restart(self, tp: Partition) -> None: ...
    def unknown_topics(self) -> set[str]: ...


class Restarts(Protocol):
    """What the watch asks of the lane's checkpoint: a recreated topic's partition committed from its start."""

    def restart(self, tp: Partition) -> None: ...


class Destinations(Protocol):
    """The lane's ledger: each source topic's destinations."""

    @property
    def destinations_of(self) -> Mapping[str, Sequence[str]]: ...


class SourceIds(Protocol):
    """The offset map's recorder (kafka.offset_map_recorder): the source topic ids its runs name."""

    def source_id(self, topic: str, topic_id: str) -> None: ...


class MapWriter(Protocol):
    """The lane's writer: its offset map's recorder (None: no offset map kept)."""

    @property
    def offset_map(self) -> SourceIds | None: ...


class _Unwired:
    """Until `SourceWatch.read_through`: nothing to hold or restart partitions through."""

    def hold(self, tps: set[Partition], hold: bool) -> None:
        raise AssertionError("SourceWatch.read_through was not called")

    def restart(self, tp: Partition) -> None:
        raise AssertionError("SourceWatch.read_through was not called")

    def unknown_topics(self) -> set[str]:
        return set()


class SourceWatch:
    """The sources' topic ids, asked on assignment, at each metadata refresh interval (`every_s`), and at once where
    a read finds a topic unknown; what the lane loses of them, reported."""

    def __init__(self, lane: str, config: Config, topic_ids: TopicIds, every_s: float, *, book: PartitionBook,
                 ledger: Destinations, metrics: LaneMetrics,
                 writer: MapWriter) -> None:
        self.lane = lane
        self.config = config
        self._topic_ids = topic_ids
        self._ids: dict[str, str] = {}
        self._every = every_s
        self._due = 0.0
        #: what the lane holds, where it is in each partition, each one's highest end seen (and where the lane was
        #: when it released one), what is withheld from commits
        self.book = book
        self.ledger = ledger
        self.metrics = metrics
        self.writer = writer
        #: holds and restarts partitions (the lane's copy path), and commits a restarted one from its start (the
        #: lane's checkpoint): `read_through`
        self._reader: Reader = _Unwired()
        self._restarts: Restarts = _Unwired()
        #: partitions of a source found deleted: not read (by name: a topic recreated meanwhile would be read from
        #: the old one's position) until its id is known again
        self._gone: set[Partition] = set()
        #: on_source_loss: stop: the loss that stops the lane (raised once it has committed what it copied)
        self.error: TranscoderError | None = None

    def read_through(self, reader: Reader, restarts: Restarts) -> None:
        """The copy path the watch holds and restarts partitions through, and the checkpoint that commits a
        restarted one from its start (built after the watch: the path reports its losses here)."""
        self._reader = reader
        self._restarts = restarts

    def tick(self, now: float) -> None:
        """From the loop: the sources' ids asked each metadata refresh interval (sooner, at most once a second,
        after a read found a topic unknown), the answers taken without waiting."""
        answers = self._topic_ids.answers()
        if answers:
            self.check(answers)
        hint = self._reader.unknown_topics()
        if now >= self._due or (hint and now >= self._due - self._every + 1):
            hint.clear()
            self._topic_ids.ask({t for t, _ in self.book.assigned})
            self._due = now + self._every

    def assigning(self, tps: list[Partition]) -> set[Partition]:
        """Partitions being assigned whose topic was recreated since the lane saw it (each a loss, reported)."""
        return self.check(self._topic_ids.now({t for t, _ in tps}), assigning=tps)

    def recreated(self, topics: list[str], at: dict[Partition, int]) -> set[Partition]:
        """A read found a position out of range (`at`): whether the topic was recreated (reported as such)."""
        return self.check(self._topic_ids.now(topics), at=at)

    def fetch_loss(self, loss: SourceLoss) -> None:
        """A loss a Fetch found: a recreated topic is reported as such, any other through `lost`."""
        if loss.records is None and self.recreated([loss.topic], at={(loss.topic, loss.partition): loss.offset}):
            return
        self.lost(loss)

    def release(self, tps: list[Partition]) -> None:
        """Partitions the lane lets go (where it was is the book's: a topic recreated meanwhile is reported from
        there)."""
        self._gone.difference_update(tps)

    def consumer_error(self, err: KafkaError) -> None:
        """An error the consumer reports (or a record carries): end of partition and a source deleted are not."""
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and self.unknown_topic(err):
            return
        if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                         KafkaError.GROUP_AUTHORIZATION_FAILED):
            raise TranscoderError(f"lane {self.lane}: consumer error: {err.str()}", kafka_error=err.name())
        log.warning("consumer_error", lane=self.lane, error=err.str())

    def unknown_topic(self, err: KafkaError) -> bool:
        """The consumer found a source unknown: deleted? Recreated or not, the topic id checks (soon) tell."""
        gone = [t for t in self._ids if t in err.str()]
        if gone:
            log.warning("source_topic_unknown", lane=self.lane, topics=gone, error=err.str(),
                        note="deleted? a topic recreated under the same name is a loss (source_records_lost)")
            self._due = 0.0
        return bool(gone)

    def check(self, ids: dict[str, str], assigning: Iterable[Partition] = (),
              at: dict[Partition, int] | None = None) -> set[Partition]:
        """Topics whose id changed since the lane first saw them (deleted and recreated): each partition the lane
        holds (or is being assigned: `assigning`) is a loss, reported through `lost`. Returns them. `at`: the lane's
        position in a partition, where it is known better than now (an offset found out of range)."""
        book = self.book
        lost: set[Partition] = set()
        assigning = set(assigning)
        for topic, new in sorted(ids.items()):
            old = self._ids.get(topic)
            if new == GONE:  # deleted: whether it comes back under a new id is seen at the next check (1 s)
                self._deleted(topic, old)
                continue
            if old not in (None, new) and not any(tp[0] == topic for tp in book.assigned | assigning):
                # recreated while the lane holds none of its partitions (an answer that came after they were lost):
                # the old id is kept, so that the assignment that hands one back reports the loss
                continue
            self._ids[topic] = new
            back = {tp for tp in self._gone if tp[0] == topic}
            if back:
                self._gone -= back
                if back & book.assigned:  # read again: where they were, or (recreated) as _recreated says: the
                    # new topic from its start (continue) or held again (stop); librdkafka keeps a pause across
                    # the reassignment of a restart, so a hold left on stopped the copy of the new topic for good
                    self._reader.hold(set(back & book.assigned), False)
            if old is None or old == new:
                self._record_id(topic, new)
                continue
            lost |= self._recreated(topic, old, new, assigning, at or {})
            if self.config.on_source_loss == "continue":  # the old topic's reads delivered (_restart): new runs
                self._record_id(topic, new)
        return lost

    def _deleted(self, topic: str, old: str | None) -> None:
        """A source found deleted: its partitions the lane holds are not read until the topic is back."""
        gone = {tp for tp in self.book.assigned if tp[0] == topic} - self._gone
        if old is not None and gone:
            self._gone.update(gone)
            self._reader.hold(gone, True)
            log.warning("source_topic_deleted", lane=self.lane, topic=topic, topic_id=old,
                        partitions=show(sorted(gone)), note="not read until the topic is back: a topic "
                        "recreated under the same name is a loss (source_records_lost)")
        self._due = min(self._due, time.monotonic() + 1)

    def _recreated(self, topic: str, old: str, new: str, assigning: set[Partition],
                   at: dict[Partition, int]) -> set[Partition]:
        """A source recreated (id `old` is now `new`): each partition the lane holds or is being assigned is a loss,
        from where the lane was in it."""
        book = self.book
        lost: set[Partition] = set()
        for tp in sorted(tp for tp in book.assigned | assigning if tp[0] == topic):
            pos = at.get(tp)
            if pos is None and tp not in assigning:
                pos = book.position(tp)
            max_end, released_at = book.take_last_seen(tp)
            if pos is None:
                pos = released_at
            seen = max(max_end, pos if pos is not None else -1)  # what it read, at least
            loss = SourceLoss(topic, tp[1], pos if pos is not None else 0, 0, 0, topic_id=old, new_topic_id=new,
                              seen_end=seen if pos is not None else -1)
            lost.add(tp)
            if self.config.on_source_loss == "stop":
                book.withhold(tp)
                if tp in book.assigned:
                    self._reader.hold({tp}, True)
            elif tp not in assigning:
                # read from the new topic's start before the loss is stored (the offset map's write takes a
                # while): the consumer's own out-of-range error for the old position must not come first
                self._restart(tp)
            self.lost(loss)
        return lost

    def _record_id(self, topic: str, topic_id: str) -> None:
        """The offset map's runs that begin from now on name `topic_id` as their source topic's."""
        recorder = self.writer.offset_map
        if recorder is not None:
            recorder.source_id(topic, topic_id)

    def recreated_by_map(self, fresh: list[Partition]) -> set[Partition]:
        """Partitions the group never committed (Kafka deletes a group's offsets with the topic) whose offset map
        holds copies of another source topic than the one there now (`offset_runs.replaced_source`: another topic
        id, or none recorded): the topic was deleted and recreated since they were copied (the lane that copied
        them stopped before it saw that). A loss, its count unknown; returns them."""
        lost: set[Partition] = set()
        if self.config.migration is None:  # no offset map to read
            return lost
        maps: dict[str, dict[int, Any]] = {}
        for tp in sorted(fresh):
            for dest in self.ledger.destinations_of.get(tp[0], ()):
                if dest not in maps:
                    try:
                        maps[dest] = offset_map.read(self.config, dest, timeout=30)[0]
                    except TopicError:  # no map topic yet: nothing copied to compare with
                        maps[dest] = {}
                found = replaced_source(maps[dest].get(tp[1]), self._ids.get(tp[0]))
                if found is None:
                    continue
                self._recreated_lost(SourceLoss(tp[0], tp[1], found.at, 0, 0,
                                                topic_id=found.recorded_id or "(not recorded)",
                                                new_topic_id=self._ids.get(tp[0]) or "(unknown)", by_map=True),
                                     by_map=found)
                lost.add(tp)
                if self.config.on_source_loss == "stop":
                    self.book.withhold(tp)
                break
        return lost

    def _restart(self, tp: Partition) -> None:
        """on_source_loss: continue, a partition the lane holds whose topic was recreated: what was read of the
        old topic is delivered, and the new topic is read from its start (nothing of the old one committed to it)."""
        self._restarts.restart(tp)  # at-least-once: what was read of the old topic delivered first
        self._reader.restart(tp)

    def lost(self, loss: SourceLoss) -> None:
        """Records the lane needs are gone from the source: one line naming them, the counter, the offset map's
        gap (verify and cutover see it), and on_source_loss: stop ends the lane once it committed what it copied."""
        if loss.recreated:
            self._recreated_lost(loss)
            return
        error = report_loss(self.config, self.lane, loss, self.metrics,
                            self.ledger.destinations_of.get(loss.topic, ()), self._ids.get(loss.topic))
        if error is not None and self.error is None:
            self.error = error

    def _recreated_lost(self, loss: SourceLoss, by_map: ReplacedSource | None = None) -> None:
        """`lost` for a topic deleted and recreated (a new topic id); `by_map`: found between runs from the offset
        map (`recreated_by_map`)."""
        n = loss.records
        stop = self.config.on_source_loss == "stop"
        what = recreation_line(loss, by_map)
        log.error("source_records_lost", lane=self.lane, topic=loss.topic, partition=loss.partition,
                  offset=loss.offset, topic_id=loss.topic_id, new_topic_id=loss.new_topic_id,
                  last_end_offset=loss.seen_end if loss.seen_end >= 0 else None,
                  mapped_offsets=f"{by_map.mapped[0]}..{by_map.mapped[1] - 1}" if by_map and by_map.mapped else None,
                  records_lost=n if n is not None else "unknown", on_source_loss=self.config.on_source_loss,
                  note=what + ("; the lane stops (on_source_loss: stop)" if stop else
                               "; copying the new topic from its start (on_source_loss: continue)"))
        if n:
            self.metrics.source_records_lost(loss.topic, loss.partition, n)
        old_id = loss.topic_id if by_map is None else by_map.recorded_id
        self._store_gap(loss, loss.seen_end if n else loss.offset if n == 0 else loss.offset + 1,
                        Recreation(old_id, self._ids.get(loss.topic), loss.offset, n, continued=not stop))
        if stop and self.error is None:
            self.error = DataLossError(
                f"lane {self.lane}: {what}; stopped (on_source_loss: stop), nothing committed for the new "
                "topic: to copy it from its start, run once with on_source_loss: continue", topic=loss.topic,
                partition=loss.partition, offset=loss.offset)

    def _store_gap(self, loss: SourceLoss, hi: int, recreated: Recreation | None = None) -> None:
        """Migrations: the offset map's gap [loss.offset, hi) for each destination of the topic (a recreation: its
        entry, naming both ids, even when nothing is known lost)."""
        if self.config.migration is not None:
            offset_map.store_lost(self.config, [(loss.topic, d, loss.partition, loss.offset, hi)
                                                for d in self.ledger.destinations_of.get(loss.topic, ())],
                                  self.config.shutdown_timeout_s,
                                  source_id=recreated.old_id if recreated else self._ids.get(loss.topic),
                                  recreated=recreated)

    def close(self) -> None:
        self._topic_ids.close()


def recreation_line(loss: SourceLoss, by_map: ReplacedSource | None = None) -> str:
    """Pure: what a recreated source lost, in one line (topic, partition, offsets, both topic ids, the count or
    "unknown")."""
    where = f"{loss.topic} [{loss.partition}]"
    n = loss.records
    if by_map is None:
        return (f"source topic {loss.topic} was deleted and recreated (topic id {loss.topic_id} is now "
                f"{loss.new_topic_id}): {where} was at offset {loss.offset}; "
                + (f"the old topic's last end seen was {loss.seen_end}: records {loss.offset}..{loss.seen_end - 1} "
                   f"({n}) were lost before they were copied (and any written after that end)" if n else
                   f"the old topic's last end seen was {loss.seen_end}: no record seen was left uncopied (any written "
                   "after that end were lost)" if n == 0 else
                   "its end was never seen: how many records were lost is unknown"))
    mapped = (f"the offset map of {where} holds copies of its source offsets {by_map.mapped[0]}.."
              f"{by_map.mapped[1] - 1}" if by_map.mapped is not None else
              f"the offset map of {where} holds a recreation found before and nothing copied of the new topic since")
    lost = (f"records of the old topic from offset {loss.offset} on were lost before they were copied (how many "
            "unknown: its end after the last copy was never seen)")
    no_commit = "the group has no committed offset (Kafka deleted it with the topic)"
    if by_map.recorded_id is None:
        return (f"source topic {loss.topic} taken as deleted and recreated while no lane copied it: {no_commit}, "
                f"{mapped}, and records no topic id to compare with the topic's now ({loss.new_topic_id}): mapped "
                f"before transcoder recorded topic ids; {lost}")
    if loss.new_topic_id == "(unknown)":
        return (f"source topic {loss.topic} taken as deleted and recreated while no lane copied it: {no_commit}, "
                f"{mapped} (topic id {by_map.recorded_id}), and the topic's id now could not be read; {lost}")
    return (f"source topic {loss.topic} was deleted and recreated while no lane copied it (topic id "
            f"{by_map.recorded_id} is now {loss.new_topic_id}): {mapped} and {no_commit}; {lost}")
