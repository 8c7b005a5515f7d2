"""The benchmark end to end on a small dataset: every copier copies every record, and the report has its rows.

Speed is never asserted here: only that each figure was measured from what the broker holds.
"""

from __future__ import annotations

import json
import time

from bench.run import Dataset, bench, report
from tests.support.tools import require_tool

# Every test here runs kcat among its copiers: without kcat it is skipped (failed when CI is set).
KCAT_INSTALL = "install the Debian package `kcat` (.ci/run does: apt-get install kcat)"


def test_bench_measures_every_copier_on_the_same_data(kafka, admin, tmp_path):
    require_tool("kcat", KCAT_INSTALL, alternatives=["kafkacat"])
    data = Dataset(name="nginx", kind="nginx", from_file=None, count=3000)
    broker = kafka.local.state().pid if kafka.local else None
    res = bench(kafka.bootstrap, tmp_path, data, runs=1, codecs=["zstd"],
                chosen=["transcoder", "mm2", "mm2-default", "kcat"], partitions=1, latency_records=200,
                latency_rate=500.0, client_tables=True, broker_pid=broker)

    assert res.seeded.records == 3000
    # Each copy is measured once its destination holds the whole dataset; the live trickle goes to a
    # topic of its own, so every copier copies the same records.
    assert [(r.copier, r.records, r.uncompressed_bytes) for r in res.copies] == [
        (c, 3000, res.seeded.bytes) for c in ("transcoder", "mm2", "mm2-default", "kcat")]
    for r in res.copies:
        assert r.codec == "zstd"
        assert r.seconds > 0 and r.cpu_seconds >= 0 and r.startup_seconds > 0, r
        if broker is not None:
            assert r.broker_cpu_seconds is not None and r.broker_cpu_seconds >= 0, r
        assert 0 < r.disk_bytes < r.uncompressed_bytes / 2, r  # zstd on nginx logs: stored compressed
        if r.copier == "kcat":
            assert r.latency_p50 is None and r.latency_p99 is None
        else:
            assert 0 < r.latency_p50 <= r.latency_p99 < 60, r
    assert [(c.codec, c.records) for c in res.produced] == [("zstd", 3000)]
    assert [(c.codec, c.records) for c in res.consumed] == [("zstd", 3000)]
    assert res.produced[0].uncompressed_bytes == res.consumed[0].uncompressed_bytes
    assert 0 < res.produced[0].traffic_bytes < res.produced[0].uncompressed_bytes

    text = report(res, codecs=["zstd"], runs=1, dataset="nginx", partitions=1, command="python -m bench",
                  latency_records=200, latency_rate=500.0)
    rows = [line for line in text.splitlines() if line.startswith("| zstd | ")]
    assert [line.split(" | ")[1] for line in rows[:4]] == ["transcoder", "mm2", "mm2-default", "kcat"]
    assert "## Targets" in text and "## Cloudflare-style table" in text and "2017-style consumer table" in text

    # Nothing is left behind: source, destinations and MirrorMaker 2's state topics are deleted.
    deadline = time.monotonic() + 60
    # (the live topics are named bench.nginx.<stamp>.live-<copier>-zstd-1, their MM2 copies m1zstd*.bench...)
    while left := [t for t in admin.list_topics(timeout=10).topics if t.startswith(("bench.", "mm2-", "m1zstd"))]:
        assert time.monotonic() < deadline, left
        time.sleep(0.5)


def test_bench_copies_your_own_ndjson_keyed_by_a_field(kafka, tmp_path):
    require_tool("kcat", KCAT_INSTALL, alternatives=["kafkacat"])
    lines = [json.dumps({"user_id": f"u{i % 37}", "path": f"/api/items/{i % 211}", "status": 200 + i % 3})
             for i in range(1500)]
    path = tmp_path / "events.ndjson"
    path.write_text("\n".join(lines) + "\n")
    data = Dataset(name="events", kind=None, from_file=path, count=1500, key_field="user_id")
    res = bench(kafka.bootstrap, tmp_path, data, runs=1, codecs=["lz4"], chosen=["transcoder", "kcat"],
                partitions=1, latency_records=100, latency_rate=500.0, client_tables=False)

    # key (the user_id field) + value (the line) of every line, as seeded and as copied
    expected = sum(len(f"u{i % 37}") + len(line.encode()) for i, line in enumerate(lines))
    assert (res.seeded.records, res.seeded.bytes) == (1500, expected)
    assert [(r.copier, r.records, r.uncompressed_bytes) for r in res.copies] == [
        ("transcoder", 1500, expected), ("kcat", 1500, expected)]
    assert all(0 < r.disk_bytes for r in res.copies)
    assert res.copies[0].latency_p99 is not None and res.copies[1].latency_p99 is None
