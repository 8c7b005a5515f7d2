"""`transcoder seed` end to end against the session's broker: what was asked is what is stored."""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from itertools import islice

from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka.admin import ConfigResource

from tests.support.cli import run_cli
from transcoder.dev import datagen

START = "2026-11-01T00:00:00Z"
START_MS = 1_793_491_200_000


def _one_error_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("transcoder: error: ")
    return lines[0]


def test_seed_nginx_100k_records_read_back_exactly(kafka, admin, read_topic):
    topic = "seed-nginx-100k"
    proc = run_cli("seed", "--kind", "nginx", "--count", "100000", "--topic", topic, "-b", kafka.bootstrap,
                   "--partitions", "3", "--seed", "7", "--start", START, "--headers")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("seeded 100,000 records"), proc.stdout
    # records stamped from START on (weeks ago): the topic keeps them past Kafka's default week (without it the
    # broker's retention check deleted a segment of them before they were read back)
    [config] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    assert int(config.result()["retention.ms"].value) > time.time() * 1000 - START_MS

    got = read_topic(topic)
    assert len(got) == 100_000
    expected = list(islice(datagen.generate("nginx", seed=7, keys=True, headers=True, start_ms=START_MS,
                                            events_per_second=2000.0), 100_000))
    as_tuple = lambda key, value, headers, ts: (key, value, tuple(headers or ()), ts)  # noqa: E731
    assert Counter(as_tuple(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got) == Counter(
        as_tuple(r.key, r.value, r.headers, r.timestamp_ms) for r in expected)
    for m in got:
        assert m.timestamp()[0] == TIMESTAMP_CREATE_TIME
        assert m.key() == m.value().split(b" ", 1)[0]  # keyed by client IP
    # Each partition keeps the generator's order.
    for p in range(3):
        ts = [m.timestamp()[1] for m in got if m.partition() == p]
        assert ts and ts == sorted(ts)


def test_seed_bytes_stops_at_the_size_asked(kafka, read_topic):
    proc = run_cli("seed", "--kind", "dns", "--bytes", "2MB", "--topic", "seed-dns-bytes", "-b", kafka.bootstrap,
                   "--no-keys")
    assert proc.returncode == 0, proc.stderr
    got = read_topic("seed-dns-bytes")
    total = sum(len(m.value()) for m in got)
    assert 2_000_000 <= total < 2_000_000 + 4096
    assert all(m.key() is None for m in got)


def test_seed_entities_creates_a_compacted_topic_with_tombstones(kafka, admin, read_topic):
    from confluent_kafka.admin import ConfigResource

    proc = run_cli("seed", "--kind", "entities", "--count", "5000", "--topic", "seed-entities",
                   "-b", kafka.bootstrap, "--no-keys")
    assert proc.returncode == 0, proc.stderr
    res = ConfigResource(ConfigResource.Type.TOPIC, "seed-entities")
    cfg = admin.describe_configs([res])[res].result()
    assert cfg["cleanup.policy"].value == "compact"
    got = read_topic("seed-entities")
    assert len(got) == 5000
    assert all(m.key() for m in got)
    assert any(m.value() is None for m in got)


def test_seed_from_a_directory_of_lines_and_ndjson(kafka, read_topic, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.log").write_text("first line\nsecond line\n\nthird line\n")
    objs = [{"id": f"u{i}", "n": i} for i in range(5)]
    with gzip.open(d / "b.ndjson.gz", "wt") as f:
        f.write("\n".join(json.dumps(o) for o in objs) + "\n")
    proc = run_cli("seed", "--file", str(d), "--key-field", "id", "--topic", "seed-dir", "-b", kafka.bootstrap)
    assert proc.returncode == 0, proc.stderr
    got = read_topic("seed-dir")
    assert [(m.key(), m.value()) for m in got] == [
        (None, b"first line"), (None, b"second line"), (None, b"third line"),
        *[(o["id"].encode(), json.dumps(o).encode()) for o in objs],
    ]


def test_oversize_line_is_refused_naming_file_and_line_and_earlier_lines_are_kept(kafka, read_topic, tmp_path):
    f = tmp_path / "big.log"
    f.write_text("ok 1\nok 2\n" + "x" * 2_000_000 + "\nnever sent\n")
    proc = run_cli("seed", "--file", str(f), "--topic", "seed-oversize", "-b", kafka.bootstrap)
    assert proc.returncode == 2
    line = _one_error_line(proc)
    assert f"{f}:3" in line and "2,000,000 bytes" in line
    assert [m.value() for m in read_topic("seed-oversize")] == [b"ok 1", b"ok 2"]


def test_missing_file_is_one_line_and_exit_2(kafka, tmp_path):
    proc = run_cli("seed", "--file", str(tmp_path / "nope.log"), "--topic", "never", "-b", kafka.bootstrap)
    assert proc.returncode == 2
    assert "nope.log does not exist" in _one_error_line(proc)


def test_unreachable_bootstrap_is_one_line_and_non_zero():
    proc = run_cli("seed", "--kind", "nginx", "--count", "10", "--topic", "t", "-b", "127.0.0.1:1")
    assert proc.returncode == 5  # ExitCode.UNAVAILABLE
    line = _one_error_line(proc)
    assert "cannot reach Kafka at 127.0.0.1:1" in line


def test_existing_topic_with_other_partition_count_is_refused(kafka, topic_factory):
    topic = topic_factory(partitions=2)
    proc = run_cli("seed", "--kind", "nginx", "--count", "10", "--topic", topic, "-b", kafka.bootstrap,
                   "--partitions", "4")
    assert proc.returncode == 1
    assert "exists with 2 partitions, not the 4 asked for" in _one_error_line(proc)


def test_bad_arguments_are_refused_before_connecting():
    proc = run_cli("seed", "--kind", "nginx", "--topic", "t", "-b", "127.0.0.1:1")
    assert proc.returncode == 2
    assert "give --count or --bytes" in _one_error_line(proc)
    proc = run_cli("seed", "--kind", "mp3", "--count", "1", "--topic", "t", "-b", "127.0.0.1:1")
    assert proc.returncode == 2
    assert "unknown --kind 'mp3'" in _one_error_line(proc)
