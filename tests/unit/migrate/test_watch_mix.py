"""`migrate watch`, the pure part: sampling stored batches over a fake log, the mix arithmetic, the
compression.type verdict; and the migration metrics (--since: tests/unit/cli/test_options.py)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from transcoder.metrics.registry import MigrationMetrics, exposition
from transcoder.migrate import watch as w
from transcoder.migrate.watch import PartitionMix, StoredBatch, TopicMix
from transcoder.migrate.watch import StoredTotals as Tally

NOW = 1_795_000_000_000


def log(*runs: tuple[str, int, int], start: int = 0, size_per_record: int = 10) -> list[StoredBatch]:
    """Consecutive batches: each run is (codec, batches, records per batch)."""
    out, offset = [], start
    for codec, batches, per in runs:
        for _ in range(batches):
            out.append(StoredBatch(offset, offset + per - 1, codec, per, 61 + per * size_per_record))
            offset += per
    return out


class FakeBroker:
    """A Fetch as the broker answers it: from the batch holding the offset, whole batches up to max_bytes, at
    least one (KIP-74). Records every fetch."""

    def __init__(self, batches: list[StoredBatch]) -> None:
        self.batches = batches
        self.fetches: list[tuple[int, int]] = []

    def __call__(self, offset: int, max_bytes: int) -> list[StoredBatch]:
        self.fetches.append((offset, max_bytes))
        out, size = [], 0
        for b in self.batches:
            if b.last_offset < offset:
                continue
            if out and size + b.size > max_bytes:
                break
            out.append(b)
            size += b.size
        return out


def test_clip_counts_the_offsets_of_a_batch_inside_the_range():
    b = StoredBatch(10, 19, "zstd", 10, 1000)
    assert w.clip(b, 0, 100) == (10, 1000, 10)
    assert w.clip(b, 15, 100) == (5, 500, 5)  # straddles the start
    assert w.clip(b, 0, 12) == (2, 200, 2)  # straddles the end
    assert w.clip(b, 20, 30) is None and w.clip(b, 0, 10) is None
    compacted = StoredBatch(0, 9, "lz4", 4, 400)  # 4 records left over 10 offsets: pro rata
    assert w.clip(compacted, 5, 10) == (2, 200, 5)


def test_a_range_within_the_budget_is_read_whole_and_exact():
    batches = log(("gzip", 3, 10), ("lz4", 2, 10), ("zstd", 4, 5))  # offsets 0..69
    fetch = FakeBroker(batches)
    mix = w.sample_partition(fetch, 0, 25, 70, max_bytes=1 << 20)
    assert mix.complete and mix.sampled_offsets == 45 and mix.note is None
    assert {c: (t.batches, t.records) for c, t in mix.codecs.items()} == {
        "gzip": (1, 5), "lz4": (2, 20), "zstd": (4, 20)}  # the batch holding 25 counts for 25..29 only
    assert mix.codecs["lz4"].bytes == 2 * 161 and mix.codecs["gzip"].bytes == round(161 / 2)
    assert len(fetch.fetches) == 1


def test_batches_past_the_end_are_not_counted():
    mix = w.sample_partition(FakeBroker(log(("gzip", 2, 10), ("zstd", 5, 10))), 3, 0, 25, max_bytes=1 << 20)
    assert {c: t.records for c, t in mix.codecs.items()} == {"gzip": 20, "zstd": 5}
    assert (mix.partition, mix.offsets, mix.complete) == (3, 25, True)


def test_a_range_read_in_small_fetches_is_still_whole_when_the_windows_keep_up():
    batches = log(("gzip", 20, 10), ("zstd", 12, 10))  # 320 offsets, 161 B each: 5,152 B
    fetch = FakeBroker(batches)
    mix = w.sample_partition(fetch, 0, 0, 320, max_bytes=16 * 400)  # 400 B a window: 2-3 batches each
    assert mix.complete
    assert {c: t.records for c, t in mix.codecs.items()} == {"gzip": 200, "zstd": 120}
    assert len(fetch.fetches) > w.WINDOWS  # successive fetches, each window carrying on where the last stopped


def test_a_large_range_is_sampled_in_evenly_spread_windows_within_the_budget():
    batches = log(("gzip", 600, 10), ("lz4", 200, 10), ("zstd", 200, 10))  # 10,000 offsets
    fetch = FakeBroker(batches)
    budget = 16 * 500  # three batches a window
    mix = w.sample_partition(fetch, 0, 0, 10_000, max_bytes=budget)
    assert not mix.complete and 0 < mix.sampled_offsets < 10_000
    records = {c: t.records for c, t in mix.codecs.items()}
    assert set(records) == {"gzip", "lz4", "zstd"}  # spread over the whole range, not its first batches only
    share = w.shares(mix.codecs)
    assert share["gzip"] == pytest.approx(0.6, abs=0.1) and share["zstd"] == pytest.approx(0.2, abs=0.1)
    starts = [off for off, _ in fetch.fetches]
    assert starts[0] == 0 and max(starts) >= 9000
    read = sum(t.bytes for t in mix.codecs.values())
    assert read <= budget + w.WINDOWS * 161  # each window may overrun by one batch


def test_windows_never_count_a_batch_twice():
    batches = log(("zstd", 3, 100))  # 300 offsets, 3 big batches, 16 windows
    mix = w.sample_partition(FakeBroker(batches), 0, 0, 300, max_bytes=16)
    assert mix.codecs["zstd"].batches == 3 and mix.codecs["zstd"].records == 300 and mix.complete


def test_markers_and_aborted_batches_are_covered_but_not_counted():
    batches = [StoredBatch(0, 9, "zstd", 10, 200), StoredBatch(10, 10, "none", 1, 70, visible=False),
               StoredBatch(11, 20, "zstd", 10, 200)]
    mix = w.sample_partition(FakeBroker(batches), 0, 0, 21)
    assert mix.complete and mix.codecs["zstd"].records == 20 and "none" not in mix.codecs


def test_offsets_compaction_removed_are_covered():
    batches = [StoredBatch(0, 9, "lz4", 10, 200), StoredBatch(20, 29, "zstd", 4, 100),  # 4 left of 10
               StoredBatch(40, 49, "zstd", 10, 200)]
    mix = w.sample_partition(FakeBroker(batches), 0, 5, 45)
    assert mix.complete and mix.sampled_offsets == 40
    assert {c: t.records for c, t in mix.codecs.items()} == {"lz4": 5, "zstd": 4 + 5}


def test_a_partition_without_batches_where_records_should_be_stops_with_a_note():
    mix = w.sample_partition(FakeBroker(log(("lz4", 1, 10))), 0, 0, 50)
    assert mix.codecs["lz4"].records == 10 and not mix.complete
    assert mix.note and "offset 10" in mix.note


def test_an_empty_range_fetches_nothing():
    fetch = FakeBroker(log(("lz4", 1, 10)))
    mix = w.sample_partition(fetch, 0, 10, 10)
    assert mix.codecs == {} and mix.complete and fetch.fetches == []


def test_hide_aborted_follows_the_consumer_rule():
    def b(base: int, last: int) -> StoredBatch:
        return StoredBatch(base, last, "zstd", last - base + 1, 100)

    batches = [
        (b(0, 4), 7, True, False),  # producer 7, committed transaction
        (b(5, 5), 7, True, True),  # its commit marker
        (b(6, 9), 8, True, False),  # producer 8, aborted from offset 6
        (b(10, 14), 9, False, False),  # not transactional
        (b(15, 15), 8, True, True),  # producer 8's abort marker
        (b(16, 19), 8, True, False),  # producer 8 again, committed later
    ]
    out = w.hide_aborted(batches, [(6, 8)])
    assert [x.visible for x in out] == [True, False, False, True, False, True]
    assert [x.base_offset for x in out] == [0, 5, 6, 10, 15, 16]


def test_shares_by_records_and_bytes():
    codecs = {"gzip": Tally(2, 30, 900), "zstd": Tally(1, 10, 100)}
    assert w.shares(codecs) == {"gzip": 0.75, "zstd": 0.25}
    assert w.shares(codecs, "bytes") == {"gzip": 0.9, "zstd": 0.1}
    assert w.shares({}) == {} and w.shares({"lz4": Tally()}) == {}
    assert w.merge([codecs, {"zstd": Tally(1, 5, 5)}]) == Tally(4, 45, 1005)
    assert w.by_codec([codecs, {"zstd": Tally(1, 5, 5)}])["zstd"] == Tally(2, 15, 105)
    assert w.codec_order(["zstd", "id-7", "gzip", "none"]) == ["none", "gzip", "zstd", "id-7"]


@pytest.mark.parametrize(("share", "text"), [(0.0, "0%"), (1.0, "100%"), (0.5, "50%"), (0.125, "12.5%"),
                                             (0.0004, "<0.1%"), (0.9996, ">99.9%")])
def test_percent_says_0_and_100_only_when_exact(share, text):
    assert w.percent(share) == text


def test_verdict_producer_topic_stores_as_written():
    v = w.verdict("t", "producer", "zstd", 0.42, "2026-11-01T00:00:00Z")
    assert (v.kind, v.stored_as, v.target_share) == ("producer", None, 0.42)
    assert v.text == ("compression.type=producer: stored as producers wrote it. 42% of records since "
                      "2026-11-01T00:00:00Z are stored as zstd.")


def test_verdict_other_codec_says_the_broker_recompresses_and_how_to_fix_it():
    v = w.verdict("t", "gzip", "zstd", 0.0, "T")
    assert (v.kind, v.stored_as) == ("recompresses", "gzip")
    assert "the broker recompresses to gzip: the mix shows gzip whatever producers send; set " \
           "compression.type=producer" in v.text
    assert "--entity-name t --add-config compression.type=producer" in v.text
    assert v.text.endswith("0% of records since T are stored as zstd.")
    u = w.verdict("t", "uncompressed", "zstd", None, "T")
    assert (u.kind, u.stored_as) == ("recompresses", "none")
    assert u.text.endswith("no records were written since T.")


def test_verdict_target_codec_topic_hides_which_producers_switched():
    v = w.verdict("t", "zstd", "zstd", 1.0, "T")
    assert (v.kind, v.stored_as) == ("target", "zstd")
    assert "stored as producers wrote them" in v.text and "cannot tell which producers switched" in v.text
    assert w.verdict("t", "lz4", "lz4", 1.0, "T").kind == "target"


def _iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _mix(ctype: str = "producer") -> TopicMix:
    p0 = PartitionMix(0, 100, 130, 30, {"gzip": Tally(1, 10, 300), "zstd": Tally(2, 20, 100)})
    p1 = PartitionMix(1, 50, 250, 100, {"zstd": Tally(5, 100, 500)}, note=None)
    return TopicMix("t", _iso_ms("2026-11-01T00:00:00+00:00"), ctype, "zstd", [p0, p1],
                    _iso_ms("2026-11-01T01:00:00+00:00"))


def test_topic_mix_document():
    doc = _mix().as_dict()
    assert (doc["since"], doc["sampled_at"], doc["compression_type"], doc["target"]) == (
        "2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z", "producer", "zstd")
    p0, p1 = doc["partitions"]
    assert (p0["start_offset"], p0["end_offset"], p0["offsets"], p0["complete"]) == (100, 130, 30, True)
    assert p0["codecs"]["gzip"] == {"batches": 1, "records": 10, "bytes": 300, "records_share": 1 / 3,
                                    "bytes_share": 0.75}
    assert (p1["offsets"], p1["sampled_offsets"], p1["complete"], p1["records"]) == (200, 100, False, 100)
    total = doc["total"]
    assert (total["records"], total["bytes"], total["offsets"], total["sampled_offsets"], total["complete"]) == (
        130, 900, 230, 130, False)
    assert total["codecs"]["zstd"]["records"] == 120 and list(total["codecs"]) == ["gzip", "zstd"]
    assert doc["verdict"]["target_share"] == pytest.approx(120 / 130)
    assert doc["verdict"]["text"].endswith("92.3% of records since 2026-11-01T00:00:00Z are stored as zstd.")


def test_table_rows_give_each_codecs_share_of_records_and_bytes():
    headers, rows = w.table(_mix())
    assert headers == ("partition", "offsets", "records sampled", "covered", "gzip records", "gzip bytes",
                       "zstd records", "zstd bytes")
    assert rows == [
        ("0", "100..130", "30", "100%", "33.3%", "75%", "66.7%", "25%"),
        ("1", "50..250", "100", "50%", "0%", "0%", "100%", "100%"),
        ("all", "230 offsets", "130", "56.5%", "7.7%", "33.3%", "92.3%", "66.7%"),
    ]
    empty = TopicMix("t", 0, "producer", "zstd", [PartitionMix(0, 5, 5)], 1)
    assert w.table(empty)[1] == [("0", "5..5", "0", "-"), ("all", "0 offsets", "0", "-")]
    assert empty.verdict.target_share is None


def _value(m: MigrationMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_export_sets_the_stored_codec_ratio_per_codec_and_clears_it_for_an_empty_sample():
    m = MigrationMetrics()
    w.export(m, _mix())
    assert _value(m, "transcoder_stored_codec_ratio", topic="t", codec="zstd") == pytest.approx(120 / 130)
    assert _value(m, "transcoder_stored_codec_ratio", topic="t", codec="gzip") == pytest.approx(10 / 130)
    later = TopicMix("t", 0, "producer", "zstd", [PartitionMix(0, 0, 5, 5, {"zstd": Tally(1, 5, 50)})], 1)
    w.export(m, later)
    assert _value(m, "transcoder_stored_codec_ratio", topic="t", codec="zstd") == 1.0
    assert _value(m, "transcoder_stored_codec_ratio", topic="t", codec="gzip") == 0.0  # gone from the mix: 0
    w.export(m, TopicMix("t", 0, "producer", "zstd", [PartitionMix(0, 5, 5)], 1))
    assert _value(m, "transcoder_stored_codec_ratio", topic="t", codec="zstd") is None  # nothing sampled: no share


def test_migration_metrics():
    m = MigrationMetrics()
    text = exposition(m.registry)[1].decode()
    declared = set(re.findall(r"^# TYPE (transcoder_[a-z_]+) ", text, re.MULTILINE))
    assert declared == {"transcoder_stored_codec_ratio", "transcoder_migration_verified_offset",
                        "transcoder_migration_mismatches_total", "transcoder_migration_groups",
                        "transcoder_migration_predicted_ratio", "transcoder_migration_realized_ratio",
                        "transcoder_migration_predicted_bytes_per_record",
                        "transcoder_migration_realized_bytes_per_record"}
    m.verified("t.zstd", {0: 700, 2: 1500})
    assert _value(m, "transcoder_migration_verified_offset", destination="t.zstd", partition="2") == 1500
    assert _value(m, "transcoder_migration_verified_offset", destination="t.zstd", partition="0") == 700
    # verifying declares the mismatch counter at 0, so increase() sees the first mismatch
    assert _value(m, "transcoder_migration_mismatches_total", destination="t.zstd") == 0
    m.verified("t.zstd", {0: 800}, mismatches=1)
    m.mismatch("t.zstd", 2)
    assert _value(m, "transcoder_migration_mismatches_total", destination="t.zstd") == 3
    assert _value(m, "transcoder_migration_verified_offset", destination="t.zstd", partition="0") == 800
    m.group_stages("t.zstd", {"source": 3, "moving": 1})
    m.group_stages("t.zstd", {"source": 2, "destination": 2})
    assert _value(m, "transcoder_migration_groups", destination="t.zstd", stage="source") == 2
    assert _value(m, "transcoder_migration_groups", destination="t.zstd", stage="moving") == 0
    assert _value(m, "transcoder_migration_groups", destination="t.zstd", stage="destination") == 2
    m.payoff("t.zstd", predicted_ratio=8.4, realized_ratio=None, predicted_bytes_per_record=25.0,
             realized_bytes_per_record=25.5)
    assert _value(m, "transcoder_migration_predicted_ratio", destination="t.zstd") == 8.4
    assert _value(m, "transcoder_migration_realized_bytes_per_record", destination="t.zstd") == 25.5
    assert _value(m, "transcoder_migration_realized_ratio", destination="t.zstd") is None  # not known: no series


def test_migration_metrics_share_a_registry_passed_in():
    from prometheus_client import CollectorRegistry

    from transcoder.metrics.registry import Metrics

    service = Metrics(CollectorRegistry())
    m = MigrationMetrics(service.registry)
    m.stored_mix("t", {"zstd": 1.0})
    assert service.registry.get_sample_value("transcoder_stored_codec_ratio", {"topic": "t", "codec": "zstd"}) == 1


def test_migration_metrics_serve_their_own_endpoint():
    import urllib.request

    m = MigrationMetrics()
    m.group_stages("t.zstd", {"source": 1})
    port = m.serve(0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        m.stop()
    assert 'transcoder_migration_groups{destination="t.zstd",stage="source"} 1.0' in text
