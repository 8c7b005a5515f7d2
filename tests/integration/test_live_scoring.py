"""Live scoring of candidate codecs (`evaluate:` in the config) on a running service, and on the Spark engine, against
the real broker: the figures it exports are evaluate's measurement of exactly the records it says it sampled."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.configs import make_config
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import fold, measure_partition
from transcoder.report.tables import candidate_sentence

COUNT = 20_000
BATCH_BYTES = 65_536  # the destination's batch.max_bytes: a 256 KiB sample is several batches
SAMPLE_BYTES = 262_144


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def exported(text: str, name: str, **labels: str) -> float:
    """One sample's value from the /metrics exposition, as written (Python's repr of the float: exact)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if m and ",".join(sorted(m.group(1).split(","))) == want:
            return float(m.group(2))
    raise AssertionError(f"{name}{{{want}}} not exported")


def as_record(m: Any) -> tuple:
    return m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]


@pytest.mark.parametrize("engine", ["service", "spark"], indirect=True)
def test_live_scoring_exports_evaluates_figures_of_the_sampled_records(engine, kafka, topic_factory, read_topic):
    source = topic_factory(partitions=2)
    seed = run_cli("seed", "--kind", "nginx", "--count", str(COUNT), "--headers", "--topic", source,
                   "-b", kafka.bootstrap)
    assert seed.returncode == 0, seed.stderr
    dest = f"{source}.lz4"
    conf = make_config(kafka, [{"source": source,
                                "destinations": [{"codec": "lz4", "batch": {"max_bytes": BATCH_BYTES}}]}],
                       metrics={"port": 0, "stats_interval_ms": 500},  # a quick last statistics emission
                       evaluate={"sample_interval_s": 0.2, "sample_bytes": SAMPLE_BYTES, "max_cpu_share": 0.5,
                                 "candidates": [{"codec": "zstd", "level": 9}, {"codec": "gzip"}]})
    service = engine(conf)
    port = service.serve(0)
    url = f"http://127.0.0.1:{port}"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            service.run()
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 240  # a hang guard: a Spark query's first start took 113 s in a busy CI run
        while True:
            assert time.monotonic() < deadline, "no scored sample, or the copy did not finish"
            assert not errors, errors
            lanes = json.loads(get(url + "/status"))["lanes"]
            d = lanes[0]["destinations"][0] if lanes else None
            if d and d["records_out"] == COUNT and d["candidates"]["samples"] >= 1:
                break
            time.sleep(0.2)
    finally:
        service.stop()
        t.join(120)
    assert not errors, errors
    assert not t.is_alive()

    doc = json.loads(get(url + "/status"))
    metrics = get(url + "/metrics")
    report = run_cli("report", "--url", url, "--format", "json")
    service.endpoints.stop()

    (d,) = doc["lanes"][0]["destinations"]
    scoring = d["candidates"]
    assert scoring["errors"] == 0 and scoring["last_error"] is None
    sample = scoring["sample"]
    assert sample["source"] == source and sample["partition"] in (0, 1)
    first, last = sample["first_offset"], sample["last_offset"]

    # The sample is consecutive records of one partition, at most sample_bytes of them: read exactly those back.
    # (Usually a full window of several batches; the latest may be a partition's tail, scored as it was at the
    # next interval: any size from one record. The figures must be exact whatever it is.)
    src = read_topic(source)
    window = [as_record(m) for m in src if m.partition() == sample["partition"] and first <= m.offset() <= last]
    assert len(window) == sample["records"] == last - first + 1 >= 1
    size = sum(len(k or b"") + len(v or b"") + sum(len(hk) + len(hv or b"") for hk, hv in h) for k, v, h, _ in window)
    assert size == sample["record_bytes"] <= SAMPLE_BYTES

    settings = [Setting("lz4", None), Setting("zstd", 9), Setting("gzip", None)]
    cells = [Cell(s, BATCH_BYTES) for s in settings]
    lz4, zstd9, gzip = fold(measure_partition(window, cells, repeats=1, max_records=100_000), cells)
    assert sample["batches"] == lz4.batches >= 1

    # Ratios are deterministic: exactly evaluate's, in /status and in /metrics.
    assert scoring["current"]["label"] == "lz4" and scoring["current"]["ratio"] == lz4.ratio
    assert [(c["label"], c["ratio"]) for c in scoring["candidates"]] == [("zstd-9", zstd9.ratio), ("gzip", gzip.ratio)]
    assert exported(metrics, "transcoder_candidate_current_ratio", destination=dest, codec="lz4", level="") == lz4.ratio
    assert exported(metrics, "transcoder_candidate_ratio", destination=dest, codec="zstd", level="9") == zstd9.ratio
    assert exported(metrics, "transcoder_candidate_ratio", destination=dest, codec="gzip", level="") == gzip.ratio

    # CPU figures are one run's: only that there are some.
    for name, codec, level in (("transcoder_candidate_current_cpu_seconds_per_million", "lz4", ""),
                               ("transcoder_candidate_cpu_seconds_per_million", "zstd", "9"),
                               ("transcoder_candidate_cpu_seconds_per_million", "gzip", "")):
        for direction in ("compress", "decompress"):
            assert exported(metrics, name, destination=dest, codec=codec, level=level, direction=direction) > 0
    assert exported(metrics, "transcoder_candidate_samples_total", destination=dest) == scoring["samples"]
    assert exported(metrics, "transcoder_candidate_sampled_records_total",
                    destination=dest) == scoring["sampled_records"] >= sample["records"]
    scorer_cpu = re.search(r"^transcoder_candidate_scoring_cpu_seconds_total (\S+)$", metrics, re.MULTILINE)
    assert scorer_cpu is not None and float(scorer_cpu[1]) > 0
    assert not re.search(r"^transcoder_candidate_errors_total\{", metrics, re.MULTILINE)

    # The sentence, in /status and in `transcoder report`.
    cpu = {c["label"]: c["compress_cpu_s_per_1m"] for c in [scoring["current"], *scoring["candidates"]]}
    expected = [candidate_sentence("zstd-9", zstd9.ratio, cpu["zstd-9"], "lz4", lz4.ratio, cpu["lz4"]),
                candidate_sentence("gzip", gzip.ratio, cpu["gzip"], "lz4", lz4.ratio, cpu["lz4"])]
    assert expected[0].startswith("zstd-9 would store this topic ") and "× the CPU" in expected[0]
    assert [c["sentence"] for c in scoring["candidates"]] == expected
    assert report.returncode == 0, report.stderr
    (row,) = json.loads(report.stdout)
    assert row["candidates"] == expected

    # The copy itself is unchanged by the sampling.
    out = read_topic(dest)
    assert len(out) == COUNT == len(src)
    for p in (0, 1):
        assert [as_record(m) for m in out if m.partition() == p] == [as_record(m) for m in src if m.partition() == p]
