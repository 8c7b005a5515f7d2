"""`transcoder evaluate` end to end on the real broker: the sample it reads is the topic's records, its
figures are those of exactly those records, and bad input is one line and a non-zero exit."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.support.cli import run_cli
from transcoder.evaluate.grid import grid, settings
from transcoder.evaluate.measure import measure_sample

SIZES = ("codec", "level", "batch_bytes", "batches", "records", "uncompressed_bytes", "compressed_bytes", "ratio")


@pytest.fixture(scope="module")
def seeded(kafka, admin):
    """A 3-partition topic of 9,000 nginx records with headers, seeded uncompressed (module-wide)."""
    from confluent_kafka.admin import NewTopic

    topic = "evaluate-cli-nginx"
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result()
    proc = run_cli("seed", "--kind", "nginx", "--count", "9000", "--headers", "--topic", topic,
                   "-b", kafka.bootstrap, "--rate", "1000")  # timestamps end about now: within retention
    assert proc.returncode == 0, proc.stderr
    return topic


def _by_partition(messages):
    out: dict[int, list] = {}
    for m in messages:
        out.setdefault(m.partition(), []).append((m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
    return out


def test_a_topic_sample_is_the_last_records_of_each_partition_measured_exactly(kafka, seeded, read_topic):
    proc = run_cli("evaluate", "--topic", seeded, "-b", kafka.bootstrap, "--records", "1500", "--codecs", "zstd:3",
                   "--codecs", "lz4", "--codecs", "snappy", "--codecs", "gzip:1", "--batch-sizes", "16KiB,64KiB",
                   "--repeats", "1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    expected = {p: rs[-1500:] for p, rs in _by_partition(read_topic(seeded)).items()}
    assert sum(len(rs) for rs in expected.values()) == 4500
    cells = grid(settings(["zstd:3", "lz4", "snappy", "gzip:1"]), [16384, 65536])
    want = [c.as_dict() for c in measure_sample(expected, cells, repeats=1)]
    got = doc["cells"][: len(cells)]  # then the current setting (the topic's producers: none), if not in the grid
    assert [{k: c[k] for k in SIZES} for c in got] == [{k: c[k] for k in SIZES} for c in want]
    assert all(c["compress_mb_s"] > 0 and c["decompress_cpu_s_per_1m"] > 0 for c in got)
    topic = doc["sample"]["topic"]
    assert (topic["partitions"], topic["replication_factor"], topic["current_codec"]) == (3, 1, "none")
    assert topic["rate"] == pytest.approx(1000, rel=0.2)  # the seeded timeline: 1,000 records/s
    rec = doc["recommendation"]
    assert rec["current"]["codec"] == "none" and rec["workload"]["replication_factor"] == 1
    assert rec["text"].startswith(f"Use {rec['codec']}")


def test_since_and_until_select_records_by_timestamp(kafka, seeded, read_topic):
    records = _by_partition(read_topic(seeded))
    stamps = sorted(r[3] for rs in records.values() for r in rs)
    since, until = stamps[2000], stamps[5000]
    proc = run_cli("evaluate", "--topic", seeded, "-b", kafka.bootstrap, "--since", str(since), "--until",
                   str(until), "--codecs", "lz4", "--batch-sizes", "64KiB", "--repeats", "1", "--format", "json",
                   "--current", "none")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    inside = {p: [r for r in rs if since <= r[3] < until] for p, rs in records.items()}
    assert doc["cells"][0]["records"] == sum(len(rs) for rs in inside.values()) > 2900
    [want] = measure_sample(inside, grid(settings(["lz4"]), [65536]), repeats=1)
    assert doc["cells"][0]["compressed_bytes"] == want.compressed_bytes


def test_outputs_markdown_csv_and_an_html_report_with_plots(kafka, seeded, tmp_path):
    base = ("evaluate", "--topic", seeded, "-b", kafka.bootstrap, "--records", "500", "--codecs", "zstd:1,3",
            "--codecs", "lz4", "--batch-sizes", "16KiB,64KiB", "--repeats", "1", "--rate", "20000")
    md = run_cli(*base, "--format", "markdown", "--html", str(tmp_path / "report"))
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("| setting | batch |") and "> Use " in md.stdout
    assert Image.open(tmp_path / "report" / "frontier.png").size[0] >= 600
    html = (tmp_path / "report" / "index.html").read_text()
    assert '<img src="frontier.png"' in html and "zstd-3" in html
    rows = run_cli(*base, "--format", "csv").stdout.splitlines()
    assert rows[0].startswith("codec,level,batch_bytes") and len(rows) == 1 + 6 + 1  # + the current setting


def test_generated_and_file_input_need_no_broker(tmp_path):
    gen = run_cli("evaluate", "--kind", "dns", "--count", "3000", "--codecs", "lz4", "--batch-sizes", "16KiB",
                  "--repeats", "1", "--format", "csv")
    assert gen.returncode == 0, gen.stderr
    assert gen.stdout.splitlines()[1].startswith("lz4,,16384,") and ",3000," in gen.stdout.splitlines()[1]
    f = tmp_path / "events.ndjson"
    f.write_text("".join(json.dumps({"user": f"u{i % 5}", "n": i}) + "\n" for i in range(400)))
    out = run_cli("evaluate", "--file", str(f), "--key-field", "user", "--codecs", "zstd:3", "--batch-sizes",
                  "4KiB", "--repeats", "1", "--format", "json")
    assert out.returncode == 0, out.stderr
    cell = json.loads(out.stdout)["cells"][0]
    assert cell["records"] == 400 and cell["batches"] > 1


@pytest.mark.parametrize(("args", "message"), [
    (("--codecs", "brotli"), "--codecs 'brotli': unknown codec 'brotli'"),
    (("--codecs", "zstd:30"), "--codecs 'zstd:30': level 30 is outside 1..22"),
    (("--batch-sizes", "4MiB"), "--batch-sizes: 4,194,304 B is above the topic's max.message.bytes"),
    (("--partition", "7"), "has partitions 0..2; there is no partition 7"),
    (("--since", "2026-01-01T00:00:00Z"), "give --records or --since/--until, not both"),
    (("--cpu-budget", "0.5", "--rate", "-1"), "--rate must be a positive number"),
    (("--min-ratio", "1000"), "no cell meets"),
])
def test_bad_input_is_one_line_and_a_nonzero_exit(kafka, seeded, args, message):
    proc = run_cli("evaluate", "--topic", seeded, "-b", kafka.bootstrap, "--records", "200", "--codecs", "lz4",
                   "--repeats", "1", *args)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_time_that_is_not_one_is_one_line(kafka, seeded):
    proc = run_cli("evaluate", "--topic", seeded, "-b", kafka.bootstrap, "--since", "yesterday")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert ("--since 'yesterday' is neither an ISO-8601 time (2026-11-01T00:00:00Z), epoch milliseconds nor a "
            "duration") in proc.stderr


def test_a_missing_topic_and_an_empty_one_are_one_line_errors(kafka, topic_factory):
    missing = run_cli("evaluate", "--topic", "no-such-topic-here", "-b", kafka.bootstrap)
    assert missing.returncode != 0 and "topic no-such-topic-here does not exist" in missing.stderr
    empty = topic_factory(partitions=2)
    proc = run_cli("evaluate", "--topic", empty, "-b", kafka.bootstrap, "--codecs", "lz4")
    assert proc.returncode != 0 and f"the sample is empty: topic {empty} gave no records" in proc.stderr
    assert "Traceback" not in missing.stderr + proc.stderr
