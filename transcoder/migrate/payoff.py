"""Did the migration pay off: what was predicted at `migrate start`, what the cluster and the copy measured since, and
the two side by side (pure: the controller gathers the facts, `migrate report` renders them).

A prediction is evaluate's measurement of the destination's one cell (codec, level, batch size) on the source
topic's own recent records, with the source's bytes per record as stored at that moment. A reading is what the
clusters and the copier said at one moment of the migration's life (its start, each cutover, its finish, and each
`migrate status` / `migrate report`): both topics' bytes on disk (DescribeLogDirs) and records, and the copier's
own counters (records, their bytes, the bytes of the batches it produced, its CPU) as its lane last published them
in the offset-map topic. Both are kept in the migration's state topic, so any machine sees the same history.

The figures compared, per record and on one replica:
- ratio: record bytes (keys + values + headers) / bytes stored, the copy's codec and batching included;
- stored bytes per record: the copy's bytes on disk / its records;
- disk ratio: the source's stored bytes per record / the copy's;
- wire bytes per record: the bytes of the batches the copier produced / its records (predicted: as stored);
- CPU s per 1M records: predicted is the codec's compression alone (evaluate's), realized the copier's whole
  process share (fetching, framing, compressing, producing): not the same quantity, and said so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from transcoder.errors import MigrationError

#: The stored forms' version (the `prediction` and `reading/<at>` records of the state topic).
FORMAT_VERSION = 1
MS_PER_DAY = 86_400_000
#: `migrate verify` (each pass of --follow) stores a reading when the last one is older than this
READING_EVERY_MS = 300_000


def _check_version(doc: Mapping[str, Any], what: str) -> None:
    version = int(doc.get("version", 1))
    if version > FORMAT_VERSION:
        raise MigrationError(f"the migration's {what} was written by a newer transcoder (format version {version}, "
                             f"this one reads up to {FORMAT_VERSION}): upgrade transcoder to read it")


def stored_bytes_per_record(disk_bytes: int | None, replicas: int | None, records: int | None) -> float | None:
    """Bytes one record takes on one replica (as stored, and so as fetched); None: nothing to divide."""
    if not disk_bytes or not replicas or not records:
        return None
    return disk_bytes / replicas / records


@dataclass(frozen=True)
class Prediction:
    """evaluate's figures for the destination's codec, level and batch size, on a sample of the source's records."""

    codec: str
    level: int | None
    batch_max_bytes: int
    records: int  # in the sample
    record_bytes: int  # the sample's keys + values + headers
    stored_bytes: int  # the sample cut into the destination's batches, framed and compressed (one replica)
    compress_cpu_s_per_1m: float
    #: the source topic's bytes on disk per record and replica when predicted; None: the brokers did not say
    source_bytes_per_record: float | None
    sample: str  # where the sample came from (partitions and offsets)
    at_ms: int

    @property
    def ratio(self) -> float:
        return self.record_bytes / self.stored_bytes

    @property
    def bytes_per_record(self) -> float:
        return self.stored_bytes / self.records

    @property
    def disk_ratio(self) -> float | None:
        if self.source_bytes_per_record is None:
            return None
        return self.source_bytes_per_record / self.bytes_per_record

    def as_dict(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Prediction:
        _check_version(doc, "prediction")
        return cls(codec=str(doc["codec"]), level=doc.get("level"), batch_max_bytes=int(doc["batch_max_bytes"]),
                   records=int(doc["records"]), record_bytes=int(doc["record_bytes"]),
                   stored_bytes=int(doc["stored_bytes"]), compress_cpu_s_per_1m=float(doc["compress_cpu_s_per_1m"]),
                   source_bytes_per_record=doc.get("source_bytes_per_record"), sample=str(doc.get("sample", "")),
                   at_ms=int(doc["at_ms"]))


@dataclass(frozen=True)
class TopicSize:
    """One topic at one moment: bytes on disk over every replica, records held (end - start offsets), replicas,
    and the sum of its end offsets (records ever written: what a rate is taken from, retention aside)."""

    disk_bytes: int | None
    records: int
    replicas: int
    end_offsets: int

    @property
    def bytes_per_record(self) -> float | None:
        return stored_bytes_per_record(self.disk_bytes, self.replicas, self.records)


@dataclass(frozen=True)
class Copier:
    """The copier's counters for the destination, as its lane last published them (cumulative since the lane
    started: a restart begins them again, and the ratios below are of what it did since)."""

    records: int
    record_bytes: int  # keys + values + headers of the records produced
    wire_bytes: int  # the batches produced, framed and compressed
    cpu_s: float | None  # the lane's threads (fetch, framing, compression, produce); None: not measured
    at_ms: int


@dataclass(frozen=True)
class Reading:
    """What the clusters and the copier said at one moment of the migration."""

    at_ms: int
    step: str  # the step that took it: start, status, cutover, finish, report
    source: TopicSize
    copy: TopicSize
    copier: Copier | None
    #: records the copy lagged its source then (source ends - the lane's committed offsets); None: not known
    lag_records: int | None = None
    groups_moved: int = 0

    @property
    def disk_ratio(self) -> float | None:
        s, c = self.source.bytes_per_record, self.copy.bytes_per_record
        return None if s is None or c is None else s / c

    @property
    def ratio(self) -> float | None:
        """Record bytes per stored byte: the copier's average record size over the copy's stored bytes per record."""
        c = self.copy.bytes_per_record
        if self.copier is None or not self.copier.records or c is None:
            return None
        return self.copier.record_bytes / self.copier.records / c

    @property
    def wire_bytes_per_record(self) -> float | None:
        if self.copier is None or not self.copier.records:
            return None
        return self.copier.wire_bytes / self.copier.records

    @property
    def cpu_s_per_1m(self) -> float | None:
        if self.copier is None or not self.copier.records or self.copier.cpu_s is None:
            return None
        return self.copier.cpu_s / self.copier.records * 1e6

    def as_dict(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Reading:
        _check_version(doc, "reading")
        cop = doc.get("copier")
        return cls(at_ms=int(doc["at_ms"]), step=str(doc["step"]), source=TopicSize(**doc["source"]),
                   copy=TopicSize(**doc["copy"]), copier=Copier(**cop) if cop else None,
                   lag_records=doc.get("lag_records"), groups_moved=int(doc.get("groups_moved", 0)))


def reading_key(r: Reading) -> str:
    """The reading's key in the state topic (one per moment: compaction keeps every reading)."""
    return f"reading/{r.at_ms:015d}"


@dataclass(frozen=True)
class Figure:
    """One figure, predicted against realized."""

    name: str
    unit: str
    predicted: float | None
    realized: float | None
    note: str = ""
    #: False: the two are not the same quantity (shown side by side, no difference computed)
    comparable: bool = True

    @property
    def difference(self) -> float | None:
        """(realized - predicted) / predicted; None where either is missing, or they are not comparable."""
        if not self.comparable or self.predicted is None or self.realized is None or self.predicted == 0:
            return None
        return (self.realized - self.predicted) / self.predicted

    def line(self) -> str:
        """e.g. "ratio 8.41x predicted, 8.37x realized, -0.5%"."""
        return (f"{self.name} {fmt(self.predicted, self.unit)} predicted, {fmt(self.realized, self.unit)} realized"
                + ("" if self.difference is None else f", {self.difference * 100:+.1f}%"))


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "x":
        return f"{v:.2f}x"
    if unit == "B":
        return f"{v:,.1f} B"
    if unit == "s":
        return f"{v:.2f} s"
    return f"{v:,.2f} {unit}".rstrip()


def figures(p: Prediction | None, r: Reading | None) -> list[Figure]:
    """The figures compared, the latest reading against the prediction."""
    def pr(attr: str) -> float | None:
        return None if p is None else getattr(p, attr)

    def re(attr: str) -> float | None:
        return None if r is None else getattr(r, attr)

    copy_bpr = None if r is None else r.copy.bytes_per_record
    return [
        Figure("ratio", "x", pr("ratio"), re("ratio"),
               "record bytes (keys, values, headers) per byte stored, batch framing included"),
        Figure("stored bytes per record", "B", pr("bytes_per_record"), copy_bpr,
               "the copy's bytes on disk (DescribeLogDirs) per record, one replica"),
        Figure("disk ratio", "x", pr("disk_ratio"), re("disk_ratio"),
               "the source's stored bytes per record / the copy's"),
        Figure("wire bytes per record", "B", pr("bytes_per_record"), re("wire_bytes_per_record"),
               "the batches the copier produced (predicted: as stored)"),
        Figure("CPU s per 1M records", "s", pr("compress_cpu_s_per_1m"), re("cpu_s_per_1m"),
               "predicted: compression alone; realized: the copier's lane (fetch, framing, compression, produce), "
               "not the same quantity", comparable=False),
    ]


@dataclass(frozen=True)
class Savings:
    """Disk the copy saves against its source."""

    #: the source's records stored as the copy stores them, over the copy's replicas: bytes saved now
    disk_saved_bytes: float | None
    #: at the rate the source received records between the first and the last reading
    disk_saved_bytes_per_day: float | None
    records_per_day: float | None
    #: the copier's CPU over the migration (the sum of what each lane run published last)
    cpu_s: float | None


def savings(readings: Sequence[Reading]) -> Savings:
    """From the readings in time order."""
    if not readings:
        return Savings(None, None, None, None)
    last = readings[-1]
    s, c = last.source.bytes_per_record, last.copy.bytes_per_record
    per_record = None if s is None or c is None else s - c
    saved = None if per_record is None else per_record * last.source.records * max(last.copy.replicas, 1)
    rate = None
    first = readings[0]
    span = last.at_ms - first.at_ms
    if span > 0 and last.source.end_offsets >= first.source.end_offsets:
        rate = (last.source.end_offsets - first.source.end_offsets) / span * MS_PER_DAY
    per_day = None if rate is None or per_record is None else rate * per_record * max(last.copy.replicas, 1)
    return Savings(saved, per_day, rate, copier_cpu(readings))


def copier_cpu(readings: Iterable[Reading]) -> float | None:
    """The copier's CPU over the readings: its counters start again when its lane restarts (a drop), so each run's
    last figure is added."""
    total, last, seen = 0.0, None, False
    for r in readings:
        if r.copier is None or r.copier.cpu_s is None:
            continue
        seen = True
        if last is not None and r.copier.cpu_s < last:
            total += last
        last = r.copier.cpu_s
    return None if not seen else total + (last or 0.0)


@dataclass(frozen=True)
class GroupLine:
    group: str
    stage: str
    moved_ms: int | None
    history: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Payoff:
    """Everything `migrate report` shows of one migration."""

    migration: str
    source: str
    codec: str
    stage: str
    started_ms: int | None
    finished_ms: int | None
    groups: tuple[GroupLine, ...]
    #: partition -> the source offset up to which (exclusive) verification compared the copy equal
    verified_through: dict[int, int]
    mismatch: str | None
    prediction: Prediction | None
    readings: tuple[Reading, ...]
    figures: tuple[Figure, ...]
    savings: Savings
    #: per cutover: (group, moved at, the copy's lag at the reading taken with it)
    cutovers: tuple[tuple[str, int, int | None], ...] = field(default=())


def readings_of(state: Mapping[str, Mapping[str, Any]]) -> list[Reading]:
    """The readings kept in a migration's state, in time order."""
    return [Reading.from_dict(state[k]) for k in sorted(k for k in state if k.startswith("reading/"))]


def payoff(state: Mapping[str, Mapping[str, Any]], *, migration: str) -> Payoff:
    """The report of a migration from its state records (the state topic's latest value per key)."""
    m = state.get("migration")
    if m is None:
        raise MigrationError(f"migration {migration} has no state: nothing to report (run `transcoder migrate "
                             "start` first)")
    pred = Prediction.from_dict(state["prediction"]) if "prediction" in state else None
    readings = readings_of(state)
    groups = tuple(sorted((GroupLine(k.split("/", 1)[1], str(v.get("stage")), v.get("moved_ms"),
                                     tuple((str(s), int(t)) for s, t in v.get("history", [])))
                           for k, v in state.items() if k.startswith("group/")), key=lambda g: g.group))
    verified = {int(k.split("/", 1)[1]): int(v["verified_through"]) for k, v in sorted(state.items())
                if k.startswith("verify/") and "verified_through" in v}
    cutovers = []
    for r in readings:
        if r.step.startswith("cutover:"):
            cutovers.append((r.step.split(":", 1)[1], r.at_ms, r.lag_records))
    return Payoff(migration=migration, source=str(m.get("source")), codec=str(m.get("codec")),
                  stage=str(m.get("stage")), started_ms=m.get("started_ms"), finished_ms=m.get("finished_ms"),
                  groups=groups, verified_through=verified, mismatch=(state.get("mismatch") or {}).get("line"),
                  prediction=pred, readings=tuple(readings),
                  figures=tuple(figures(pred, readings[-1] if readings else None)), savings=savings(readings),
                  cutovers=tuple(cutovers))
