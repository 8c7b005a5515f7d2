"""What reads the stored batches themselves (a raw Fetch, kafka-python's record parsing) makes of the old
message format: `transcoder evaluate` samples the records and names the stored codec, `transcoder migrate watch`
counts every record, wrapper and stored byte of magic v1 message sets; where v0 lacks what a command needs
(timestamps for --since) it refuses in one line naming the topic, the partition and the format."""

from __future__ import annotations

import json

from tests.legacy.conftest import PARTITIONS, RECORDS
from tests.support.cli import run_cli
from transcoder.codecs import CODEC_OF_ID
from transcoder.evaluate import sample as sampling
from transcoder.evaluate.batches import record_size
from transcoder.pipeline.batching import RECORD_OVERHEAD


def test_evaluate_samples_old_format_topics_exactly(legacy, legacy_sources, read_topic):
    stored = legacy.stored_batches([s.topic for s in legacy_sources], PARTITIONS)
    for s in legacy_sources:
        got = sampling.read_topic({"bootstrap.servers": legacy.bootstrap}, s.topic, records=RECORDS)
        want = read_topic(legacy.bootstrap, s.topic)
        assert got.records == RECORDS
        flat = [(p, r) for p in sorted(got.partitions) for r in got.partitions[p]]
        assert [(p, r[0], r[1], r[2], r[3]) for p, r in flat] == [
            (m.partition(), m.key(), m.value(), (), m.timestamp()[1]) for m in want], s.topic
        facts = got.topic
        assert facts is not None and facts.current_codec == s.codec, s.topic
        assert CODEC_OF_ID[{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}[s.codec]] == s.codec
        # The stored batch size it reports: partition 0's records, uncompressed, per stored wrapper (or message).
        p0 = got.partitions[0]
        true = sum(record_size(r) + RECORD_OVERHEAD for r in p0) / len(stored[(s.topic, 0)])
        assert facts.current_batch_bytes is not None and 0.67 * true <= facts.current_batch_bytes <= 1.5 * true, (
            s.topic, facts.current_batch_bytes, true)
        if s.magic == 0:
            assert facts.rate is None  # v0 records have no timestamps: no rate to judge
        else:
            assert facts.rate is not None and 0.9 <= facts.rate <= 1.1  # written 1 record/s (timestamps 1 s apart)


def test_evaluate_cli_on_old_format_topics(legacy, legacy_sources):
    for s in (legacy_sources[0], legacy_sources[-1]):  # v1 gzip, v0 snappy
        proc = run_cli("evaluate", "-b", legacy.bootstrap, "-t", s.topic, "--records", "300", "--codecs", "zstd:3",
                       "--batch-sizes", "64KiB", timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"Against the current {s.codec} in " in proc.stdout


def test_evaluate_since_a_time(legacy, legacy_sources):
    """v1 records carry timestamps, so --since finds them; v0 ones do not, which is said in one line."""
    v1, v0 = legacy_sources[0], legacy_sources[-1]
    proc = run_cli("evaluate", "-b", legacy.bootstrap, "-t", v1.topic, "--since", "2000-01-01T00:00:00Z",
                   "--codecs", "zstd:3", "--batch-sizes", "64KiB", "--format", "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["sample"]["records"] == RECORDS and doc["sample"]["topic"]["current_codec"] == v1.codec
    proc = run_cli("evaluate", "-b", legacy.bootstrap, "-t", v0.topic, "--since", "2000-01-01T00:00:00Z", timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [(
        f"transcoder: error: cannot find the offsets of {v0.topic} [0] by time: the topic is stored in message format "
        "v0 (before Kafka 0.10), whose records carry no timestamps; give --records instead of --since/--until")]


def test_migrate_watch_counts_every_v1_record_wrapper_and_byte(legacy, legacy_sources):
    v1 = [s for s in legacy_sources if s.magic == 1]
    stored = legacy.stored_batches([s.topic for s in v1], PARTITIONS)
    for s in v1:
        proc = run_cli("migrate", "watch", "-b", legacy.bootstrap, "-t", s.topic, "--since", "2d", "--format", "json",
                       timeout=120)
        assert proc.returncode == 0, proc.stderr
        mix = json.loads(proc.stdout)
        for part in mix["partitions"]:
            wrappers = stored[(s.topic, part["partition"])]
            assert part["complete"] and part["note"] is None, part
            assert (part["records"], part["batches"], part["bytes"]) == (
                RECORDS // PARTITIONS, len(wrappers), sum(int(b["size"]) for b in wrappers)), (s.topic, part)
            assert list(part["codecs"]) == [s.codec]
        assert mix["total"]["records"] == RECORDS
        assert mix["verdict"]["target_share"] == 0.0


def test_migrate_watch_refuses_v0_since_a_time_in_one_line(legacy, legacy_sources):
    s = next(s for s in legacy_sources if s.magic == 0)
    proc = run_cli("migrate", "watch", "-b", legacy.bootstrap, "-t", s.topic, "--since", "2d", timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"transcoder: error: cannot find the offsets of {s.topic} [0] at ")
    assert "message format v0" in lines[0] and "no timestamps" in lines[0]
