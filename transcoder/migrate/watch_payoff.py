"""An in-place rollout's payoff (`transcoder migrate watch`): what `evaluate` predicts for the target codec, and
what the stored batches realize against it. The mix itself is migrate.watch's.

The prediction (issue 45): evaluate's measurement of the target codec on the topic's own latest records, cut into
batches of as many records as the broker stores per batch for those same records now (the producers' batching,
read from the stored batches holding them), kept as a migrate.payoff.Prediction; and against it what is realized:
the stored bytes per record of the batches the broker keeps in the target codec since the time. The sampler reads
stored batches without decompressing them, so their records' own bytes, and with them a realized ratio, are not
known here: bytes per record are what is compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol, cast

from transcoder.codecs import Codec
from transcoder.errors import TopicError
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import measure_sample
from transcoder.evaluate.sample import plan_topic, read_ranges
from transcoder.metrics.registry import MigrationMetrics
from transcoder.migrate.payoff import Figure, Prediction
from transcoder.migrate.watch import StoredTotals, TopicMix, Watcher, by_codec, iso, merge

#: The prediction's key in the state topic, under the migration named after the topic (as `migrate start`'s).
PREDICTION_KEY = "prediction"
#: Default records per partition the prediction is taken on (`--predict-records`).
DEFAULT_PREDICT_RECORDS = 10_000
#: The prediction's batches are cut by their count of records alone: no byte limit short of this.
_NO_BYTE_LIMIT = 1 << 40


def per_record(t: StoredTotals) -> float | None:
    """Stored bytes per record; None without records."""
    return t.bytes / t.records if t.records else None


def records_per_batch(codecs: Mapping[str, StoredTotals]) -> float | None:
    """The stored batches' average count of records; None without batches."""
    t = merge([codecs])
    return t.records / t.batches if t.batches else None


def split(codecs: Mapping[str, StoredTotals], target: str) -> tuple[StoredTotals, StoredTotals]:
    """(the target codec's totals, every other codec's together)."""
    return (merge([{c: t for c, t in codecs.items() if c == target}]),
            merge([{c: t for c, t in codecs.items() if c != target}]))


def realized_figures(prediction: Prediction | None, mix: TopicMix) -> list[Figure]:
    """The prediction against what the mix shows of the batches stored in the target codec since the time."""
    target, others = split(mix.codecs, mix.target)
    t, o = per_record(target), per_record(others)

    def pr(attr: str) -> float | None:
        return None if prediction is None else cast("float | None", getattr(prediction, attr))

    return [
        Figure("ratio", "x", pr("ratio"), None,
               "record bytes (keys, values, headers) per byte stored, batch framing included; realized: not known "
               "here (the watch reads the stored batches without decompressing them)"),
        Figure("stored bytes per record", "B", pr("bytes_per_record"), t,
               f"the {mix.target} batches stored since {iso(mix.since_ms)} as the broker keeps them (header "
               "included) per record, one replica"),
        Figure("disk ratio", "x", pr("disk_ratio"), None if o is None or not t else o / t,
               f"the other codecs' stored bytes per record / {mix.target}'s (predicted: the other codecs' of the "
               "records sampled, or of the first sample's batches where those are all in the target already)"),
        Figure("CPU s per 1M records", "s", pr("compress_cpu_s_per_1m"), None,
               "predicted: compression alone (evaluate's); realized: the producers' own, which the watch does not see"),
    ]


@dataclass(frozen=True)
class WatchPayoff:
    """What one sample shows of the prediction: the prediction, the figures, and where the prediction is kept."""

    prediction: Prediction | None
    figures: tuple[Figure, ...]
    kept: str

    def as_dict(self) -> dict[str, Any]:
        return {"prediction": None if self.prediction is None else self.prediction.as_dict(),
                "figures": [{**asdict(f), "difference": f.difference} for f in self.figures], "kept": self.kept}

    def lines(self) -> list[str]:
        """The table output's lines: where the prediction comes from, then one line per figure known."""
        p = self.prediction
        out = [f"prediction: {self.kept}"]
        if p is not None:
            out.append(f"predicted on {p.sample}")
        out += [f"  {f.line()}" for f in self.figures if f.predicted is not None or f.realized is not None]
        unknown = [f.name for f in self.figures if f.realized is None and f.predicted is not None]
        if unknown:
            out.append(f"not realized here: {', '.join(unknown)} (the watch reads stored batches without "
                       "decompressing them, and does not see the producers' CPU)")
        return out


def watch_payoff(prediction: Prediction | None, kept: str, mix: TopicMix) -> WatchPayoff:
    return WatchPayoff(prediction, tuple(realized_figures(prediction, mix)), kept)


def export_payoff(metrics: MigrationMetrics, topic: str, payoff: WatchPayoff) -> None:
    """The prediction and the realized bytes per record as transcoder_migration_predicted_*{destination=<topic>}
    and transcoder_migration_realized_bytes_per_record (the realized ratio is not known here: not set)."""
    stored = next(f for f in payoff.figures if f.name == "stored bytes per record")
    p = payoff.prediction
    metrics.payoff(topic, predicted_ratio=None if p is None else p.ratio, realized_ratio=None,
                   predicted_bytes_per_record=stored.predicted, realized_bytes_per_record=stored.realized)


def predict(watcher: Watcher, mix: TopicMix, *, level: int | None, records_per_partition: int,
            now_ms: int) -> Prediction | None:
    """evaluate's measurement of the watch's target codec at `level` on the last `records_per_partition` records
    of each watched partition, cut into batches of as many records as the broker stores per batch for those same
    records (the producers' batching now); None when the partitions hold no records.

    The bytes it is set against (Prediction.source_bytes_per_record): the stored bytes per record of the sampled
    records' batches in other codecs than the target, or where all are in the target already, of `mix`'s."""
    plan = plan_topic(watcher.cluster, watcher.topic, partitions=watcher.partitions, records=records_per_partition)
    sample = read_ranges(plan)
    if not sample.records:
        return None
    stored = by_codec(m.codecs for m in watcher.walk({p: (a, b + 1) for p, (a, b) in sample.offsets.items()}))
    per_batch = records_per_batch(stored)
    if per_batch is None:
        raise TopicError(f"cannot predict for {watcher.topic}: no stored batch was found holding the "
                         f"{sample.records:,} records sampled", topic=watcher.topic)
    n = max(1, round(per_batch))
    setting = Setting(cast(Codec, watcher.target), level)
    [cell] = measure_sample(sample.partitions, [Cell(setting, _NO_BYTE_LIMIT)], max_records=n)
    where = ", ".join(f"{p}:{a}-{b}" for p, (a, b) in sorted(sample.offsets.items()))
    return Prediction(
        codec=watcher.target, level=level, batch_max_bytes=round(cell.uncompressed_bytes / cell.batches),
        records=cell.records, record_bytes=cell.record_bytes, stored_bytes=cell.compressed_bytes,
        compress_cpu_s_per_1m=round(cell.compress_cpu_s_per_1m, 4),
        source_bytes_per_record=per_record(split(stored, watcher.target)[1]) or per_record(
            split(mix.codecs, watcher.target)[1]),
        sample=(f"{sample.records:,} records of {watcher.topic} (partition:offsets {where}) as {setting.label}, in "
                f"batches of {n:,} records: the {merge([stored]).batches:,} batches the broker stores them in hold "
                f"{per_batch:,.1f} on average"),
        at_ms=now_ms)


class Store(Protocol):
    """Where a prediction is kept: migrate.state.StateStore of the migration named after the topic."""

    topic: str

    def read(self) -> dict[str, dict[str, Any]]: ...

    def put(self, key: str, value: Mapping[str, Any]) -> int: ...


class KeptPrediction:
    """The watch's prediction, taken once per process: with a store, the one kept there for the target codec and
    level (taken by an earlier watch, here or on another machine), else computed and kept there; without one,
    computed and kept by this process only. A topic without records is tried again at the next sample."""

    def __init__(self, compute: Callable[[TopicMix], Prediction | None], *, topic: str, codec: str, level: int | None,
                 store: Store | None) -> None:
        self._compute, self.topic, self.codec, self.level, self._store = compute, topic, codec, level, store
        self._got: tuple[Prediction, str] | None = None

    def get(self, mix: TopicMix) -> tuple[Prediction | None, str]:
        """(the prediction, where it comes from and is kept); (None, why) when there is none yet. `mix`: the
        sample it is taken with."""
        if self._got is not None:
            return self._got
        where = None if self._store is None else f"state topic {self._store.topic}, migration {self.topic}"
        replacing = ""
        if self._store is not None:
            doc = self._store.read().get(PREDICTION_KEY)
            if doc is not None:
                kept = Prediction.from_dict(doc)
                if (kept.codec, kept.level) == (self.codec, self.level):
                    self._got = (kept, f"taken at {iso(kept.at_ms)} by an earlier watch, read from {where}")
                    return self._got
                replacing = f", replacing the one kept there for {label(kept.codec, kept.level)}"
        p = self._compute(mix)
        if p is None:
            return None, f"none yet: {self.topic} holds no records to sample"
        if self._store is not None:
            self._store.put(PREDICTION_KEY, p.as_dict())
            self._got = (p, f"taken at {iso(p.at_ms)} by this watch, kept in {where}{replacing}")
        else:
            self._got = (p, f"taken at {iso(p.at_ms)} by this watch, not kept (with --config it is kept in the "
                            "migration state topic, and a restarted watch or another machine shows the same)")
        return self._got


def label(codec: str, level: int | None) -> str:
    """zstd, zstd-3 ... (evaluate's names)."""
    return Setting(cast(Codec, codec), level).label
