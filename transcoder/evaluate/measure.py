"""Measuring the grid on one partition's records, and folding partitions into one figure per cell.

`measure_partition` is what either engine runs for each partition of the sample (in-process, or in a
Spark Python worker): cut the records into batches once per batch size, then for each setting compress
every batch's records section (`repeats` times, timed on the thread's CPU clock) and decompress it.
Sizes are exact and deterministic; times are CPU seconds of the thread doing the work, so they read as
"per core" whatever else the machine runs. A cell is run up to `repeats` times, fewer once its runs have
taken SLOW_CELL_S of CPU.

`fold` adds the partitions' figures of each cell (bytes summed; CPU summed per repeat, then the median
of the repeats), so the result does not depend on which engine, or which executor, measured what.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from transcoder.codecs import BATCH_OVERHEAD, compress, decompress, records_section
from transcoder.evaluate.batches import Record, cut, cut_java, record_size
from transcoder.evaluate.grid import Cell, Setting

#: CPU seconds after which a cell is not repeated further on a partition (zstd-19 on a large sample: one
#: run takes seconds, and its spread is a small part of it).
SLOW_CELL_S = 1.0

#: Called after each cell of a partition is measured.
Progress = Callable[[], None]


@dataclass(frozen=True)
class Partial:
    """One cell's figures on one partition (or, summed, on several)."""

    codec: str
    level: int | None
    batch_bytes: int
    batches: int
    records: int
    record_bytes: int  # keys + values + headers
    section_bytes: int  # the batches' records sections, uncompressed: what the codec works on
    uncompressed_bytes: int  # the batches framed without compression (what `none` stores)
    compressed_bytes: int  # the batches framed with the codec (what the broker stores)
    compress_cpu_s: tuple[float, ...]  # one per repeat
    decompress_cpu_s: tuple[float, ...]
    producer: str = "librdkafka"  # whose batching rule cut the batches (grid.Cell.producer)

    @property
    def key(self) -> tuple[str, int | None, int, str]:
        return self.codec, self.level, self.batch_bytes, self.producer


def measure_partition(records: Sequence[Record], cells: Sequence[Cell], *, repeats: int = 3,
                      max_records: int = 100_000, progress: Progress | None = None) -> list[Partial]:
    """Every cell's figures on one partition's records (in offset order), in `cells` order."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    cuts: dict[tuple[object, ...], tuple[list[bytes], int, int]] = {}  # -> (sections, batches, records)
    record_bytes = sum(record_size(r) for r in records)
    out = []
    for cell in cells:
        if cell.producer == "java":  # the Java rule cuts by estimated compressed bytes: per codec and level
            how: tuple[object, ...] = (cell.batch_bytes, cell.producer, cell.setting)
        else:
            how = (cell.batch_bytes, cell.producer)
        if how not in cuts:
            batches = (cut_java(records, batch_size=cell.batch_bytes, codec=cell.setting.codec,
                                level=cell.setting.level) if cell.producer == "java"
                       else cut(records, max_bytes=cell.batch_bytes, max_records=max_records))
            cuts[how] = ([records_section(b) for b in batches], len(batches), sum(len(b) for b in batches))
        secs, n_batches, n_records = cuts[how]
        plain = sum(len(s) for s in secs)
        out.append(_measure_cell(cell, secs, n_batches, n_records, record_bytes, plain, repeats))
        if progress is not None:
            progress()
    return out


def measure_sample(partitions: Mapping[int, Sequence[Record]], cells: Sequence[Cell], *, repeats: int = 3,
                   max_records: int = 100_000, progress: Progress | None = None) -> list[CellResult]:
    """The in-process engine: every partition measured here, one after the other, then folded."""
    partials = [p for records in partitions.values()
                for p in measure_partition(records, cells, repeats=repeats, max_records=max_records,
                                           progress=progress)]
    return fold(partials, cells)


def _measure_cell(cell: Cell, secs: list[bytes], n_batches: int, n_records: int, record_bytes: int, plain: int,
                  repeats: int) -> Partial:
    codec, level = cell.setting.codec, cell.setting.level
    java = cell.producer == "java"  # java.util.zip's gzip is zlib's; the service's lanes write libdeflate's
    if codec == "none":  # nothing to compress: stored as framed
        packed, c_cpu, d_cpu = plain, (0.0,) * repeats, (0.0,) * repeats
    else:
        c_times: list[float] = []
        d_times: list[float] = []
        payloads: list[bytes] = []
        for _ in range(repeats):
            if c_times and sum(c_times) + sum(d_times) > SLOW_CELL_S:  # a slow cell: one run says enough
                break
            t0 = time.thread_time()
            payloads = [compress(codec, s, level, gzip_as_zlib=java) for s in secs]
            t1 = time.thread_time()
            for p in payloads:
                decompress(codec, p)
            c_times.append(t1 - t0)
            d_times.append(time.thread_time() - t1)
        packed, c_cpu, d_cpu = sum(len(p) for p in payloads), tuple(c_times), tuple(d_times)
    overhead = BATCH_OVERHEAD * n_batches
    return Partial(codec=codec, level=level, batch_bytes=cell.batch_bytes, batches=n_batches, records=n_records,
                   record_bytes=record_bytes, section_bytes=plain, uncompressed_bytes=overhead + plain,
                   compressed_bytes=overhead + packed, compress_cpu_s=c_cpu, decompress_cpu_s=d_cpu,
                   producer=cell.producer)


@dataclass(frozen=True)
class CellResult:
    """One cell of the grid over the whole sample: what `transcoder evaluate` reports."""

    codec: str
    level: int | None
    batch_bytes: int
    batches: int
    records: int
    record_bytes: int
    uncompressed_bytes: int
    compressed_bytes: int
    compress_cpu_s: float  # median over repeats of the CPU seconds to compress the whole sample
    decompress_cpu_s: float
    producer: str = "librdkafka"

    @property
    def label(self) -> str:
        """zstd-3, lz4 ...; `(java)` after it for batches cut by the Java producer's rule."""
        label = Setting(self.codec, self.level).label  # type: ignore[arg-type]
        return f"{label} (java)" if self.producer == "java" else label

    @property
    def ratio(self) -> float:
        return self.uncompressed_bytes / self.compressed_bytes if self.compressed_bytes else float("nan")

    @property
    def bytes_per_record(self) -> float:
        """Average bytes per record on disk (batch framing included)."""
        return self.compressed_bytes / self.records if self.records else float("nan")

    def _mb_s(self, cpu: float) -> float | None:
        return None if self.codec == "none" or cpu <= 0 else self.uncompressed_bytes / 1e6 / cpu

    @property
    def compress_mb_s(self) -> float | None:
        """Uncompressed MB compressed per CPU second (one core); None for `none`."""
        return self._mb_s(self.compress_cpu_s)

    @property
    def decompress_mb_s(self) -> float | None:
        return self._mb_s(self.decompress_cpu_s)

    @property
    def compress_cpu_s_per_1m(self) -> float:
        return self.compress_cpu_s / self.records * 1e6 if self.records else float("nan")

    @property
    def decompress_cpu_s_per_1m(self) -> float:
        return self.decompress_cpu_s / self.records * 1e6 if self.records else float("nan")

    def as_dict(self) -> dict[str, object]:
        """The cell as `--format json` and csv print it."""
        return {"codec": self.codec, "level": self.level, "batch_bytes": self.batch_bytes, "producer": self.producer,
                "batches": self.batches,
                "records": self.records, "uncompressed_bytes": self.uncompressed_bytes,
                "compressed_bytes": self.compressed_bytes, "ratio": _round(self.ratio, 4),
                "bytes_per_record": _round(self.bytes_per_record, 2),
                "compress_mb_s": _round(self.compress_mb_s, 2), "decompress_mb_s": _round(self.decompress_mb_s, 2),
                "compress_cpu_s_per_1m": _round(self.compress_cpu_s_per_1m, 4),
                "decompress_cpu_s_per_1m": _round(self.decompress_cpu_s_per_1m, 4)}


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None or math.isnan(v) else round(v, digits)


def fold(partials: Iterable[Partial], cells: Sequence[Cell]) -> list[CellResult]:
    """The sample's figure for each cell, in `cells` order: partitions summed, then the median of repeats."""
    by_key: dict[tuple[str, int | None, int, str], list[Partial]] = {}
    for p in partials:
        by_key.setdefault(p.key, []).append(p)
    out = []
    for cell in cells:
        parts = by_key.get((cell.setting.codec, cell.setting.level, cell.batch_bytes, cell.producer))
        if not parts:
            raise ValueError(f"no figures for {cell.setting.label} at {cell.batch_bytes} B ({cell.producer})")
        repeats = min(len(p.compress_cpu_s) for p in parts)  # slow cells may have stopped early somewhere
        c = statistics.median(sum(p.compress_cpu_s[r] for p in parts) for r in range(repeats))
        d = statistics.median(sum(p.decompress_cpu_s[r] for p in parts) for r in range(repeats))
        out.append(CellResult(codec=cell.setting.codec, level=cell.setting.level, batch_bytes=cell.batch_bytes,
                              batches=sum(p.batches for p in parts), records=sum(p.records for p in parts),
                              record_bytes=sum(p.record_bytes for p in parts),
                              uncompressed_bytes=sum(p.uncompressed_bytes for p in parts),
                              compressed_bytes=sum(p.compressed_bytes for p in parts),
                              compress_cpu_s=c, decompress_cpu_s=d, producer=cell.producer))
    return out
