"""The benchmark end to end on a small dataset: every copier copies every record, and the report has its rows.

Speed is never asserted here: only that each figure was measured from what the broker holds.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import copiers
from bench.run import Dataset, Trickle, bench, report
from tests.support.faults import compare_topics, produce_records
from tests.support.tools import require_tool

# The kcat and franz-go copiers (Debian's kcat, Go: optional on a developer's machine) have tests of their own:
# without the tool they are skipped, naming it (failed when CI is set); the other copiers are tested everywhere.
KCAT_INSTALL = "install the Debian package `kcat` (.ci/run does: apt-get install kcat)"
COPIERS = ("transcoder", "transcoder-records", "mm2", "mm2-default")
GO_INSTALL = "install Go 1.26 or newer (the `go` command; the Go module proxy reachable on first use)"


def test_bench_measures_every_copier_on_the_same_data(kafka, admin, tmp_path):
    data = Dataset(name="nginx", kind="nginx", from_file=None, count=3000)
    broker = kafka.local.state().pid if kafka.local else None
    res = bench(kafka.bootstrap, tmp_path, data, runs=1, codecs=["zstd"], chosen=list(COPIERS), partitions=1,
                trickle=Trickle(200, 500.0), client_tables=True, broker_pid=broker)

    assert res.seeded.records == 3000
    # Each copy is measured once its destination holds the whole dataset; the live trickle goes to a
    # topic of its own, so every copier copies the same records.
    assert [(r.copier, r.records, r.uncompressed_bytes) for r in res.copies] == [
        (c, 3000, res.seeded.bytes) for c in COPIERS]
    for r in res.copies:
        assert r.codec == "zstd"
        assert r.seconds > 0 and r.cpu_seconds >= 0 and r.startup_seconds > 0, r
        if broker is not None:
            assert r.broker_cpu_seconds is not None and r.broker_cpu_seconds >= 0, r
            assert r.broker_busiest_thread is not None and r.broker_busiest_thread >= 0, r
        assert 0 < r.disk_bytes < r.uncompressed_bytes / 2, r  # zstd on nginx logs: stored compressed
        assert 0 < r.latency_p50 <= r.latency_p99 < 60, r
        assert r.busiest_thread is not None and r.busiest_thread >= 0, r
        assert r.machine_busy is not None and r.machine_busy > 0, r
    assert [(c.codec, c.records) for c in res.produced] == [("zstd", 3000)]
    assert [(c.codec, c.records) for c in res.consumed] == [("zstd", 3000)]
    assert res.produced[0].uncompressed_bytes == res.consumed[0].uncompressed_bytes
    assert 0 < res.produced[0].traffic_bytes < res.produced[0].uncompressed_bytes

    text = report(res, codecs=["zstd"], runs=1, dataset="nginx", partitions=1, command="python -m bench",
                  trickle=Trickle(200, 500.0))
    rows = [line for line in text.splitlines() if line.startswith("| zstd | ")]
    assert [line.split(" | ")[1] for line in rows[:4]] == list(COPIERS)
    assert "## Targets" in text and "## Cloudflare-style table" in text and "2017-style consumer table" in text

    # Nothing is left behind: source, destinations and MirrorMaker 2's state topics are deleted.
    deadline = time.monotonic() + 60
    # (the live topics are named bench.nginx.<stamp>.live-<copier>-zstd-1, their MM2 copies m1zstd*.bench...)
    while left := [t for t in admin.list_topics(timeout=10).topics if t.startswith(("bench.", "mm2-", "m1zstd"))]:
        assert time.monotonic() < deadline, left
        time.sleep(0.5)


def _ndjson(tmp_path) -> tuple[Dataset, int]:
    lines = [json.dumps({"user_id": f"u{i % 37}", "path": f"/api/items/{i % 211}", "status": 200 + i % 3})
             for i in range(1500)]
    path = tmp_path / "events.ndjson"
    path.write_text("\n".join(lines) + "\n")
    # key (the user_id field) + value (the line) of every line, as seeded and as copied
    expected = sum(len(f"u{i % 37}") + len(line.encode()) for i, line in enumerate(lines))
    return Dataset(name="events", kind=None, from_file=path, count=1500, key_field="user_id"), expected


def test_bench_copies_your_own_ndjson_keyed_by_a_field(kafka, tmp_path):
    data, expected = _ndjson(tmp_path)
    res = bench(kafka.bootstrap, tmp_path, data, runs=1, codecs=["lz4"], chosen=["transcoder"],
                partitions=1, trickle=Trickle(100, 500.0), client_tables=False)
    assert (res.seeded.records, res.seeded.bytes) == (1500, expected)
    assert [(r.copier, r.records, r.uncompressed_bytes) for r in res.copies] == [("transcoder", 1500, expected)]
    assert 0 < res.copies[0].disk_bytes and res.copies[0].latency_p99 is not None


def test_bench_kcat_copier_keeps_keys_and_has_no_latency(kafka, tmp_path):
    require_tool("kcat", KCAT_INSTALL, alternatives=["kafkacat"])
    data, expected = _ndjson(tmp_path)
    res = bench(kafka.bootstrap, tmp_path, data, runs=1, codecs=["lz4"], chosen=["kcat"],
                partitions=1, trickle=Trickle(100, 500.0), client_tables=False)
    assert [(r.copier, r.records, r.uncompressed_bytes) for r in res.copies] == [("kcat", 1500, expected)]
    assert 0 < res.copies[0].disk_bytes
    assert res.copies[0].latency_p50 is None and res.copies[0].latency_p99 is None  # kcat drops timestamps


def test_the_franz_go_copier_builds_and_copies_every_record_as_it_is(kafka, topic_factory, tmp_path):
    # The compiled peer of the benchmark (bench/franz_go), built from its pinned modules as the bench builds it, and
    # run once: every record copied to its partition with its key, value, headers and timestamp. Never timed here.
    require_tool("go", GO_INSTALL)
    binary = copiers.build_franz_go()
    src, dst = topic_factory(partitions=2), topic_factory(partitions=2)
    produce_records(kafka.bootstrap, src, 600, partitions=2)
    running = copiers.start_franz_go(binary, kafka.bootstrap, src, dst, "zstd", 600, copiers.Batching(65_536, 5),
                                     tmp_path, "franz-go")
    try:
        assert running.procs[0].wait(120) == 0, running.log.read_text() if running.log else ""
    finally:
        running.stop()
    c = compare_topics(kafka.bootstrap, src, dst)
    assert (c.source, c.destination, c.lost, c.duplicates, c.foreign, c.in_order) == (600, 600, 0, 0, 0, True), \
        c.summary()


def test_the_compiled_trickle_times_every_record_it_marks_and_transcoder_s_status_is_read_beside(kafka, tmp_path):
    # The latency driver for rates the Python trickle cannot send (bench/franz_go/trickle): each timed record is
    # read back from transcoder's destination, and transcoder's /status for that destination is read after it.
    require_tool("go", GO_INSTALL)
    data, _ = _ndjson(tmp_path)
    res = bench(kafka.bootstrap, tmp_path, data, runs=1, codecs=["lz4"], chosen=["transcoder"], partitions=2,
                trickle=Trickle(300, 1000.0, driver="franz-go"), client_tables=False)
    live = res.copies[0].live
    assert live is not None and live.driver == "franz-go", live
    assert live.records == 300 and live.sent >= 300 + 3 * 1000, live  # 3 s untimed first, then the timed ones
    assert 0 < live.p50 <= live.p99 < 60 and live.produce_p99 is not None and 0 <= live.produce_p99 <= live.p99, live
    assert live.all_p50 is not None and 0 < live.all_p50 <= live.all_p99 < 60, live  # every record read, untimed too
    assert live.status_p50 is not None and 0 < live.status_p50 <= live.status_p99 < 60, live


def test_a_bench_stopped_with_sigterm_stops_its_copier_on_the_way_out(kafka, tmp_path):
    # A bench killed mid-run (SIGTERM) left its transcoder copier running, copying into a broker that was gone, for
    # 10 minutes beside the next bench (2026-11-28): Python's default SIGTERM ends the process without its `finally`s.
    bench_run = subprocess.Popen([sys.executable, "-m", "bench", "-b", kafka.bootstrap, "--count", "1000000",
                                  "--runs", "1", "--copiers", "transcoder", "--codecs", "lz4", "--no-client-tables",
                                  "--latency-records", "0", "--out", str(tmp_path / "out.md")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (copier := [p for p in copiers.descendants(bench_run.pid)[1:] if "transcoder" in _cmdline(p)]):
            assert bench_run.poll() is None and time.monotonic() < deadline, bench_run.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        bench_run.send_signal(signal.SIGTERM)
        assert bench_run.wait(90) == 128 + signal.SIGTERM
        assert not [p for p in copier if Path(f"/proc/{p}").exists()], "the copier still runs"  # stopped and reaped
    finally:
        if bench_run.poll() is None:
            bench_run.kill()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

