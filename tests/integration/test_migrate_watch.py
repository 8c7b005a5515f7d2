"""`migrate watch` on the real broker: the stored codec mix since a time is exactly what the producers wrote
(aborted transactions left out), a spread sample stays within its budget, a recompressing topic gets the
recompression verdict, --follow serves transcoder_stored_codec_ratio, and bad input is one line; the prediction
for the target codec agrees with the batches the broker stored in it (read from the segment files), and with
--config it is kept in the state topic and read back by the next watch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime

import pytest
import yaml
from click.testing import CliRunner

from tests.support.cli import run_cli
from tests.support.configs import raw_config
from transcoder.cli.main import _Cli
from transcoder.cli.migrate_watch import watch
from transcoder.codecs import CODEC_OF_ID
from transcoder.dev.datagen import generate
from transcoder.migrate.watch import iso

VALUE = b"GET /api/v1/items?page=1 HTTP/1.1 200 " * 6  # compressible: librdkafka keeps the codec asked for
PER_BATCH = 10


def cli(*args: str):
    group = _Cli()
    group.add_command(watch)
    return CliRunner().invoke(group, ["watch", *args])


def produce(producer_factory, topic: str, codec: str, counts: dict[int, int], **conf: object) -> None:
    """counts[p] records to partition p, in batches of PER_BATCH records at most, with `codec`."""
    p = producer_factory(**{"compression.type": codec, "linger.ms": 5, "batch.num.messages": PER_BATCH, **conf})
    for partition, n in counts.items():
        for i in range(n):
            p.produce(topic, value=VALUE + str(i).encode(), partition=partition)
    assert p.flush(30) == 0


def now_ms() -> int:
    time.sleep(0.02)  # records before and after this time have timestamps on their own side of it
    t = int(time.time() * 1000)
    time.sleep(0.02)
    return t


def records(part: dict) -> dict[str, int]:
    return {c: f["records"] for c, f in part["codecs"].items()}


@pytest.fixture(scope="module")
def rollout(kafka, admin):
    """A 2-partition `producer` topic: gzip records, then (after T) lz4 and zstd ones in known counts per
    partition, and an aborted transaction of snappy records; 255 records in partition 0 (≥ 26 batches)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = f"watch-rollout-{int(time.time())}"
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result()
    made: list[Producer] = []

    def factory(**conf: object) -> Producer:
        made.append(Producer({"bootstrap.servers": kafka.bootstrap, **conf}))
        return made[-1]

    produce(factory, topic, "gzip", {0: 200, 1: 30})
    since = now_ms()
    produce(factory, topic, "lz4", {0: 25, 1: 10})
    tx = factory(**{"compression.type": "snappy", "transactional.id": f"{topic}-tx", "linger.ms": 5})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(20):
        tx.produce(topic, value=VALUE + str(i).encode(), partition=0)
    tx.flush(30)
    tx.abort_transaction(30)
    produce(factory, topic, "zstd", {0: 30, 1: 35})
    return topic, since


def test_the_mix_since_a_time_is_exactly_what_producers_wrote(kafka, rollout):
    topic, since = rollout
    result = cli("--topic", topic, "-b", kafka.bootstrap, "--since", str(since), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    p0, p1 = doc["partitions"]
    assert records(p0) == {"lz4": 25, "zstd": 30}  # the aborted snappy records are not counted
    assert records(p1) == {"lz4": 10, "zstd": 35}
    assert p0["complete"] and p1["complete"] and p0["start_offset"] == 200 and p1["start_offset"] == 30
    assert p0["end_offset"] == 200 + 25 + 20 + 1 + 30  # the aborted records and their marker take offsets too
    for part in (p0, p1):
        for f in part["codecs"].values():
            assert f["batches"] >= f["records"] / PER_BATCH and f["bytes"] > 0
        assert sum(f["bytes_share"] for f in part["codecs"].values()) == pytest.approx(1)
    assert records(doc["total"]) == {"lz4": 35, "zstd": 65}
    assert doc["compression_type"] == "producer" and doc["verdict"]["kind"] == "producer"
    assert doc["verdict"]["target_share"] == pytest.approx(65 / 100)
    assert doc["verdict"]["text"] == (f"compression.type=producer: stored as producers wrote it. 65% of records "
                                      f"since {doc['since']} are stored as zstd.")

    iso = datetime.fromtimestamp(since / 1000, UTC).isoformat(timespec="milliseconds")
    result = cli("--topic", topic, "-b", kafka.bootstrap, "--since", iso, "--partition", "1", "--target", "lz4")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "compression.type: producer" in out and "stored as producers wrote it" in out
    assert "22.2% of records since" in out and "are stored as lz4" in out  # 10 of partition 1's 45
    rows = [line for line in out.splitlines() if line.startswith(("│ 1 ", "│ all "))]
    assert len(rows) == 2 and "│              45 │" in rows[0]


def test_a_large_range_is_sampled_within_the_budget_and_spread_over_it(kafka, rollout):
    topic, _ = rollout
    result = cli("--topic", topic, "-b", kafka.bootstrap, "--since", "1h", "--partition", "0",
                 "--max-bytes", "1KiB", "--format", "json")  # 64 B a window: one batch each, 16 of ≥ 28
    assert result.exit_code == 0, result.output
    (p0,) = json.loads(result.stdout)["partitions"]
    assert p0["start_offset"] == 0 and not p0["complete"] and p0["sampled_offsets"] < p0["offsets"]
    assert p0["batches"] <= 16 and p0["records"] < 255
    assert set(p0["codecs"]) == {"gzip", "lz4", "zstd"}  # windows across the range: the last ones too

    whole = json.loads(cli("--topic", topic, "-b", kafka.bootstrap, "--since", "1h", "--partition", "0",
                           "--format", "json").stdout)["partitions"][0]
    assert whole["complete"] and records(whole) == {"gzip": 200, "lz4": 25, "zstd": 30}


def test_a_topic_that_recompresses_gets_the_recompression_verdict(kafka, topic_factory, producer_factory):
    topic = topic_factory(partitions=2, config={"compression.type": "gzip"})
    since = now_ms()
    produce(producer_factory, topic, "zstd", {0: 20, 1: 20})
    result = cli("--topic", topic, "-b", kafka.bootstrap, "--since", str(since), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [records(p) for p in doc["partitions"]] == [{"gzip": 20}, {"gzip": 20}]  # producers sent zstd
    v = doc["verdict"]
    assert (doc["compression_type"], v["kind"], v["stored_as"], v["target_share"]) == ("gzip", "recompresses",
                                                                                        "gzip", 0.0)
    assert "the broker recompresses to gzip: the mix shows gzip whatever producers send; set " \
           "compression.type=producer" in v["text"]
    table = cli("--topic", topic, "-b", kafka.bootstrap, "--since", str(since))
    assert "compression.type: gzip" in table.stdout and "0% of records since" in table.stdout


def test_follow_serves_the_stored_codec_ratio(kafka, rollout):
    topic, since = rollout
    code = ("from transcoder.cli.main import _Cli; from transcoder.cli.migrate_watch import watch; "
            "g = _Cli(); g.add_command(watch); g(prog_name='transcoder migrate')")
    proc = subprocess.Popen([sys.executable, "-c", code, "watch", "--topic", topic, "-b", kafka.bootstrap,
                             "--since", str(since), "--follow", "--interval", "1", "--samples", "3", "--format", "json",
                             "--metrics-port", "0", "--metrics-host", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while not line.startswith("serving"):  # "serving /metrics and /status on host:port", after any warning
            line = proc.stderr.readline()
            assert line, "the watch ended before serving"
        port = int(line.strip().rsplit(":", 1)[1])
        first = json.loads(proc.stdout.readline())  # one line per sample; exported before it is printed
        assert records(first["total"]) == {"lz4": 35, "zstd": 65}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert f'transcoder_stored_codec_ratio{{codec="zstd",topic="{topic}"}} 0.65' in text
        assert f'transcoder_stored_codec_ratio{{codec="lz4",topic="{topic}"}} 0.35' in text
        prediction = first["payoff"]["prediction"]
        assert prediction["codec"] == "zstd" and prediction["records"] == 255 + 75  # all read back, aborted ones not
        assert (f'transcoder_migration_predicted_ratio{{destination="{topic}"}} '
                f'{prediction["record_bytes"] / prediction["stored_bytes"]!r}') in text
        stored = next(f for f in first["payoff"]["figures"] if f["name"] == "stored bytes per record")
        zstd = first["total"]["codecs"]["zstd"]
        assert stored["realized"] == zstd["bytes"] / zstd["records"]
        assert f'transcoder_migration_realized_bytes_per_record{{destination="{topic}"}} {stored["realized"]!r}' in text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as resp:
            assert json.loads(resp.read())["topic"] == topic
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert [records(json.loads(line)["total"]) for line in rest.splitlines()] == [{"lz4": 35, "zstd": 65}] * 2


def test_the_cluster_comes_from_a_config_file(kafka, rollout, tmp_path):
    topic, since = rollout
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [{"source": topic, "destinations": [{"codec": "zstd"}]}])))
    result = cli("--topic", topic, "--config", str(path), "--since", str(since), "--format", "json",
                 "--predict-records", "0")  # no prediction kept: test_the_prediction_..._is_kept
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert records(doc["total"]) == {"lz4": 35, "zstd": 65} and doc["payoff"] is None
    both = cli("--topic", topic, "--config", str(path), "-b", kafka.bootstrap)
    assert both.exit_code == 2 and both.stderr == "transcoder: error: give --config or --bootstrap-servers, not both\n"


def test_bad_input_is_one_line_and_a_non_zero_exit(kafka):
    missing = cli("--topic", "no-such-topic-watch", "-b", kafka.bootstrap)
    assert missing.exit_code != 0
    assert missing.stderr == "transcoder: error: topic no-such-topic-watch does not exist\n" and not missing.stdout
    for args, says in ((("--since", "yesterday"), "--since 'yesterday' is neither"),
                       (("--since", "2026-01-01T00:00:00"), "needs a time zone"),
                       (("--partition", "0,x"), "--partition '0,x'"),
                       (("--metrics-port", "9400"), "need --follow"),
                       (("--target-level", "99"), "--target-level: level 99 is outside")):
        result = cli("--topic", "t", "-b", kafka.bootstrap, *args)
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr


def stored_in_segments(kafka, topic: str, partition: int) -> dict[str, tuple[int, int]]:
    """codec -> (records, bytes) of the batches in the partition's segment files on the broker's disk, read with
    kafka-python: an independent reading of what the broker stores (the watch reads them over Fetch)."""
    from kafka.record import MemoryRecords

    out: dict[str, tuple[int, int]] = {}
    for path in kafka.segment_files(topic, partition):
        batches = MemoryRecords(path.read_bytes())
        while (b := batches.next_batch()) is not None:
            records, size = out.get(CODEC_OF_ID[b.compression_type], (0, 0))
            out[CODEC_OF_ID[b.compression_type]] = (records + b.records_count, size + b.size_in_bytes)
    return out


def batches_in_segments(kafka, topic: str, partition: int) -> list[tuple[str, int, int]]:
    """(codec, base offset, records) of each batch in the partition's segment files, read with kafka-python."""
    from kafka.record import MemoryRecords

    out = []
    for path in kafka.segment_files(topic, partition):
        batches = MemoryRecords(path.read_bytes())
        while (b := batches.next_batch()) is not None:
            out.append((CODEC_OF_ID[b.compression_type], b.base_offset, b.records_count))
    return out


def test_the_prediction_agrees_with_the_stored_target_batches_and_is_kept(kafka, topic_factory, producer_factory,
                                                                          tmp_path):
    """nginx records in batches of 50, gzip then zstd: the prediction (on the latest 1,000 records, at the batching
    the broker stores them in) against the zstd batches on disk; with --config kept, and read back."""
    topic = topic_factory(partitions=1)
    records = generate("nginx", seed=45)
    since = now_ms()
    for codec in ("gzip", "zstd"):
        p = producer_factory(**{"compression.type": codec, "linger.ms": 200, "batch.num.messages": 50})
        for _ in range(1500):
            r = next(records)
            p.produce(topic, key=r.key, value=r.value, partition=0)
        assert p.flush(30) == 0
    disk = stored_in_segments(kafka, topic, 0)
    assert set(disk) == {"gzip", "zstd"} and disk["zstd"][0] == 1500
    zstd_bpr = disk["zstd"][1] / disk["zstd"][0]
    gzip_bpr = disk["gzip"][1] / disk["gzip"][0]

    result = cli("--topic", topic, "-b", kafka.bootstrap, "--since", str(since), "--predict-records", "1000",
                 "--format", "json")
    assert result.exit_code == 0, result.output
    payoff = json.loads(result.stdout)["payoff"]
    p = payoff["prediction"]
    assert (p["codec"], p["level"], p["records"]) == ("zstd", None, 1000)
    # the batching predicted at: the broker's own for the sampled records (offsets 2,000-2,999, all zstd), read from
    # the segment files (the producer's 50 per batch is an upper bound: a batch may go before it is full)
    held = [n for codec, first, n in batches_in_segments(kafka, topic, 0) if codec == "zstd" and first + n > 2000]
    m = re.search(r"in batches of (\d+) records: the (\d+) batches the broker stores them in", p["sample"])
    assert m is not None and "not kept" in payoff["kept"], p["sample"]
    assert int(m.group(2)) == len(held) and min(held) <= int(m.group(1)) <= max(held) <= 50, (p["sample"], held)
    figures = {f["name"]: f for f in payoff["figures"]}
    assert figures["stored bytes per record"]["realized"] == pytest.approx(zstd_bpr, rel=1e-12)  # read whole
    assert figures["disk ratio"]["realized"] == pytest.approx(gzip_bpr / zstd_bpr, rel=1e-12)
    predicted = p["stored_bytes"] / p["records"]
    assert figures["stored bytes per record"]["predicted"] == pytest.approx(predicted)
    assert predicted == pytest.approx(zstd_bpr, rel=0.05), (predicted, zstd_bpr)
    assert figures["ratio"]["realized"] is None and figures["ratio"]["predicted"] > 1
    # the latest 1,000 records are all zstd: the gzip batches since --since are what the prediction is set against
    assert p["source_bytes_per_record"] == pytest.approx(gzip_bpr, rel=1e-12)
    assert figures["disk ratio"]["predicted"] == pytest.approx(gzip_bpr / predicted)

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [{"source": topic, "destinations": [{"codec": "zstd"}]}])))
    first = run_cli("migrate", "watch", "--topic", topic, "--config", str(path), "--since", str(since),
                    "--predict-records", "1000", "--format", "json")
    assert first.returncode == 0, first.stderr
    kept = json.loads(first.stdout)["payoff"]
    assert kept["kept"].startswith("taken at ") and "by this watch, kept in state topic" in kept["kept"]
    again = run_cli("migrate", "watch", "--topic", topic, "--config", str(path), "--since", str(since),
                    "--predict-records", "10")
    assert again.returncode == 0, again.stderr
    at = iso(kept["prediction"]["at_ms"])
    assert f"prediction: taken at {at} by an earlier watch, read from state topic" in again.stdout
    assert f"predicted on {kept['prediction']['sample']}\n" in again.stdout  # not recomputed on 10 records
    line = next(ln for ln in again.stdout.splitlines() if "stored bytes per record" in ln)
    assert f"{kept['prediction']['stored_bytes'] / 1000:,.1f} B predicted, {zstd_bpr:,.1f} B realized" in line
