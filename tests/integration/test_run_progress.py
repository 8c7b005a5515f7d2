"""A one-shot run's progress and summary against the real broker: each engine reports every lane's progress down to
nothing left; `run --until-caught-up`, as an operator runs it from a script, ends with a summary line per lane whose
records are what an independent consumer counts in the destination and, stderr being no terminal, logs JSON lines
with no progress bar and no escape code."""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.configs import make_config, raw_config
from transcoder.pipeline.progress import LaneProgress

RECORDS = 3000

#: `lane NAME: N records, X MB in, Y MB out (R x), C s CPU per 1M records, T s` (transcoder.report.run_summary)
SUMMARY = re.compile(r"^lane (?P<lane>\S+): (?P<records>[\d,]+) records, (?P<mb_in>[\d.,]+) MB in, "
                     r"(?P<mb_out>[\d.,]+) MB out \((?P<ratio>[\d.,]+)x\), (?P<cpu>[\d.,]+) s CPU per 1M records, "
                     r"(?P<elapsed>[\d.,]+) s$")


def produce(producer_factory, topic: str, n: int) -> None:
    """`n` compressible JSON records, keyed, over two partitions."""
    p = producer_factory(**{"linger.ms": 5})
    base_ts = int(time.time() * 1000) - 60_000
    for i in range(n):
        p.produce(topic, key=f"k{i % 50}".encode(), partition=i % 2, timestamp=base_ts + i,
                  value=json.dumps({"n": i, "path": f"/api/items/{i % 97}", "status": 200}).encode())
    assert p.flush(30) == 0


@pytest.mark.parametrize("engine", ["service", "spark"], indirect=True)  # the hot path reports nothing of its own
def test_each_engine_reports_every_lanes_progress_down_to_nothing_left(engine, kafka, topic_factory,
                                                                       producer_factory):
    source = topic_factory(partitions=2)
    produce(producer_factory, source, RECORDS)
    conf = make_config(kafka, [{"source": source, "destinations": [{"codec": "zstd", "name": "z"},
                                                                   {"codec": "lz4", "name": "l"}]}])
    seen: list[LaneProgress] = []
    engine(conf).run(until_caught_up=True, progress=seen.extend)
    for lane in ("z", "l"):
        reports = [p for p in seen if p.lane == lane]
        left = [p.remaining for p in reports]
        assert left[0] is not None and left == sorted(left, reverse=True), left  # offsets left never grow
        assert {p.total for p in reports} == {RECORDS}  # the source's offsets at start
        last = reports[-1]
        assert (last.state, last.records, last.remaining, last.fraction) == ("caught-up", RECORDS, 0, 1.0), last
        assert last.source_bytes > 0


def test_a_one_shot_run_ends_with_a_summary_per_lane_that_the_destination_agrees_with(kafka, topic_factory,
                                                                                      producer_factory, read_topic,
                                                                                      tmp_path):
    source = topic_factory(partitions=2)
    produce(producer_factory, source, RECORDS)
    route = {"source": source, "destinations": [{"codec": "zstd", "name": "z"}, {"codec": "lz4", "name": "l"}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [route])))

    proc = run_cli("run", "--config", str(path), "--until-caught-up", env={"TRANSCODER_LOG_LEVEL": "info"},
                   timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]

    print(proc.stdout)  # the summary, for the record
    lines = proc.stdout.splitlines()
    summaries = {m["lane"]: m for m in map(SUMMARY.match, lines) if m}
    assert len(lines) == 2 and set(summaries) == {"z", "l"}, proc.stdout
    topics = {"z": f"{source}.zstd", "l": f"{source}.lz4"}
    for lane, m in summaries.items():
        counted = len(read_topic(topics[lane]))  # an independent consumer, from the beginning to the end
        assert int(m["records"].replace(",", "")) == counted == RECORDS, (lane, m.group(0))
        assert float(m["ratio"]) > 1.5 and float(m["mb_out"]) < float(m["mb_in"]), m.group(0)

    # stderr is a pipe: JSON lines only, no bar, no escape code; the summary's figures logged as lane_summary too
    assert "\x1b" not in proc.stdout + proc.stderr
    assert not {"━", "█", "\r"} & set(proc.stderr)
    events = [json.loads(line) for line in proc.stderr.splitlines()]
    logged = {e["lane"]: e for e in events if e["event"] == "lane_summary"}
    assert {lane: e["records"] for lane, e in logged.items()} == {"z": RECORDS, "l": RECORDS}
    assert logged["z"]["destinations"][0]["topic"] == topics["z"]
