"""`migrate watch`'s prediction against what is realized (pure parts): the figures from a mix, their json and
table forms, the gauges, and the prediction kept in (and read back from) a store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from transcoder.metrics.registry import MigrationMetrics
from transcoder.migrate import watch_payoff as w
from transcoder.migrate.payoff import Prediction
from transcoder.migrate.watch import PartitionMix, TopicMix, iso
from transcoder.migrate.watch import StoredTotals as Tally
from transcoder.migrate.watch_payoff import KeptPrediction

SINCE = 1_795_000_000_000


def prediction(**changes: Any) -> Prediction:
    base = dict(codec="zstd", level=None, batch_max_bytes=12_000, records=1_000, record_bytes=240_000,
                stored_bytes=60_000, compress_cpu_s_per_1m=1.25, source_bytes_per_record=66.0,
                sample="1,000 records of t", at_ms=SINCE + 5_000)
    return Prediction(**{**base, **changes})  # type: ignore[arg-type]


def mix(target: str = "zstd") -> TopicMix:
    """gzip: 300 records in 6 batches, 19,800 B (66 B a record); zstd: 700 records in 14 batches, 43,400 B (62)."""
    parts = [PartitionMix(0, 0, 500, 500, {"gzip": Tally(4, 200, 13_200), "zstd": Tally(6, 300, 18_600)}),
             PartitionMix(1, 0, 500, 500, {"gzip": Tally(2, 100, 6_600), "zstd": Tally(8, 400, 24_800)})]
    return TopicMix("t", SINCE, "producer", target, parts, SINCE + 60_000)


def test_helpers_count_per_record_per_batch_and_split_the_target_from_the_rest():
    codecs = mix().codecs
    assert w.per_record(codecs["zstd"]) == 62.0 and w.per_record(Tally()) is None
    assert w.records_per_batch(codecs) == 1_000 / 20 and w.records_per_batch({}) is None
    target, others = w.split(codecs, "zstd")
    assert (target.batches, target.records, target.bytes) == (14, 700, 43_400)
    assert (others.batches, others.records, others.bytes) == (6, 300, 19_800)


def test_realized_figures_are_the_target_batches_bytes_per_record_against_the_prediction():
    figs = {f.name: f for f in w.realized_figures(prediction(), mix())}
    assert list(figs) == ["ratio", "stored bytes per record", "disk ratio", "CPU s per 1M records"]
    stored = figs["stored bytes per record"]
    assert (stored.predicted, stored.realized) == (60.0, 62.0)
    assert stored.difference == pytest.approx(2 / 60)
    assert stored.line() == "stored bytes per record 60.0 B predicted, 62.0 B realized, +3.3%"
    disk = figs["disk ratio"]
    assert disk.predicted == pytest.approx(66 / 60) and disk.realized == pytest.approx(66 / 62)
    assert figs["ratio"].predicted == 4.0 and figs["ratio"].realized is None  # not decompressed: not known
    assert figs["CPU s per 1M records"].predicted == 1.25 and figs["CPU s per 1M records"].realized is None


def test_realized_figures_without_target_batches_or_prediction_are_none_not_zero():
    figs = {f.name: f for f in w.realized_figures(None, mix(target="lz4"))}
    assert all(f.predicted is None for f in figs.values())
    assert figs["stored bytes per record"].realized is None and figs["disk ratio"].realized is None


def test_the_json_form_keeps_the_prediction_as_stored_and_every_figure():
    p = w.watch_payoff(prediction(), "taken at ... by this watch", mix())
    doc = json.loads(json.dumps(p.as_dict()))
    assert set(doc) == {"prediction", "figures", "kept"} and doc["kept"] == "taken at ... by this watch"
    assert Prediction.from_dict(doc["prediction"]) == prediction()
    stored = doc["figures"][1]
    assert stored == {"name": "stored bytes per record", "unit": "B", "predicted": 60.0, "realized": 62.0,
                      "note": stored["note"], "difference": pytest.approx(2 / 60), "comparable": True}
    assert "zstd batches stored since 2026-" in stored["note"]
    assert w.watch_payoff(None, "none yet", mix()).as_dict()["prediction"] is None


def test_the_table_lines_say_where_the_prediction_comes_from_and_each_figure_known():
    lines = w.watch_payoff(prediction(), "taken at X by this watch, not kept", mix()).lines()
    assert lines[:2] == ["prediction: taken at X by this watch, not kept", "predicted on 1,000 records of t"]
    assert "  stored bytes per record 60.0 B predicted, 62.0 B realized, +3.3%" in lines
    assert "  ratio 4.00x predicted, - realized" in lines
    assert lines[-1].startswith("not realized here: ratio, CPU s per 1M records (")
    assert w.watch_payoff(None, "none yet: t holds no records to sample", mix(target="lz4")).lines() == [
        "prediction: none yet: t holds no records to sample"]


def test_export_payoff_sets_the_gauges_of_the_topic_and_leaves_the_realized_ratio_unset():
    m = MigrationMetrics()
    w.export_payoff(m, "t", w.watch_payoff(prediction(), "", mix()))

    def value(name: str) -> float | None:
        return m.registry.get_sample_value(name, {"destination": "t"})

    assert value("transcoder_migration_predicted_ratio") == 4.0
    assert value("transcoder_migration_predicted_bytes_per_record") == 60.0
    assert value("transcoder_migration_realized_bytes_per_record") == 62.0
    assert value("transcoder_migration_realized_ratio") is None


class FakeStore:
    """The state topic of one migration: the latest value per key."""

    topic = "g.migrations"

    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = {}
        self.puts = 0

    def read(self) -> dict[str, dict[str, Any]]:
        return json.loads(json.dumps(self.values))

    def put(self, key: str, value: Any) -> int:
        self.values[key] = dict(value)
        self.puts += 1
        return self.puts - 1


class Compute:
    def __init__(self, *results: Prediction | None) -> None:
        self.results = list(results)
        self.calls = 0

    def __call__(self, _mix: TopicMix) -> Prediction | None:
        self.calls += 1
        return self.results.pop(0)


def test_a_prediction_is_taken_once_kept_in_the_store_and_read_back_by_the_next_watch():
    store, compute = FakeStore(), Compute(prediction())
    first = KeptPrediction(compute, topic="t", codec="zstd", level=None, store=store)
    p, kept = first.get(mix())
    assert p == prediction() and compute.calls == 1 and store.values == {"prediction": prediction().as_dict()}
    assert kept == f"taken at {iso(SINCE + 5_000)} by this watch, kept in state topic g.migrations, migration t"
    assert first.get(mix()) == (p, kept) and compute.calls == 1 and store.puts == 1  # once per process

    later = Compute(prediction(at_ms=SINCE + 99_000))
    p2, kept2 = KeptPrediction(later, topic="t", codec="zstd", level=None, store=store).get(mix())
    assert p2 == p and later.calls == 0 and store.puts == 1  # read back, not recomputed
    assert kept2 == f"taken at {iso(SINCE + 5_000)} by an earlier watch, read from state topic g.migrations, " \
                    "migration t"


def test_a_kept_prediction_for_another_level_is_replaced():
    store = FakeStore()
    store.put("prediction", prediction().as_dict())
    other = prediction(level=9)
    p, kept = KeptPrediction(Compute(other), topic="t", codec="zstd", level=9, store=store).get(mix())
    assert p == other and Prediction.from_dict(store.values["prediction"]) == other
    assert kept.endswith("migration t, replacing the one kept there for zstd")


def test_without_a_store_the_prediction_is_this_process_own_and_a_topic_without_records_is_tried_again():
    compute = Compute(None, prediction())
    kept = KeptPrediction(compute, topic="t", codec="zstd", level=None, store=None)
    assert kept.get(mix()) == (None, "none yet: t holds no records to sample")
    p, where = kept.get(mix())
    assert p == prediction() and compute.calls == 2 and "not kept (with --config it is kept" in where
