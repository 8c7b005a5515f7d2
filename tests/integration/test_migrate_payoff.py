"""`transcoder migrate report` on the real broker: a migration of realistic records to zstd, end to end, and every
figure of its report against an independent reading (the segment files on the broker's disk, the records read back).
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.cli import run_cli
from tests.support.migration import consume_group, cut_over, migrate, read_all, setup
from transcoder.service.runner import Service

RECORDS = 20_000


def _disk(kafka, topic: str, partitions: int) -> int:
    """Bytes of the topic's .log segment files on the broker's disk (one broker: one replica)."""
    return sum(f.stat().st_size for p in range(partitions) for f in kafka.segment_files(topic, p))


def _record_bytes(recs) -> int:
    """Keys, values and headers (names and values) of records read back."""
    return sum(len(k or b"") + len(v or b"") + sum(len(hk) + len(hv or b"") for hk, hv in h)
               for _, _, k, v, h, _ in recs)


def test_a_finished_migration_reports_predicted_against_realized(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=2)
    proc = run_cli("seed", "--kind", "nginx", "--count", str(RECORDS), "--topic", source, "-b", kafka.bootstrap,
                   "--headers")
    assert proc.returncode == 0, proc.stderr
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=5_000)
    path, conf, dest = setup(tmp_path, kafka, source, predict_sample_records=RECORDS)  # every record sampled
    Service(conf).run(until_caught_up=True)
    assert cut_over(path, group)[0]["outcome"] == "moved"
    consume_group(kafka, group, dest)  # the group reads the rest from the copy, then the migration finishes
    migrate("finish", "--config", path)
    doc = json.loads(migrate("report", "--config", path, "--format", "json", "--html", str(tmp_path / "r")).stdout)

    # independent readings: the segment files, and the records read back
    src_recs, dst_recs = read_all(kafka, source), read_all(kafka, dest)
    assert len(src_recs) == len(dst_recs) == RECORDS
    src_bpr = _disk(kafka, source, 2) / RECORDS
    dst_bpr = _disk(kafka, dest, 2) / RECORDS
    readings = doc["readings"]
    # verify stores no reading within 5 minutes of the last one (payoff.READING_EVERY_MS)
    assert [r["step"] for r in readings] == ["start", f"cutover:{group}", "finish"]
    last = readings[-1]
    assert last["copy"]["records"] == last["source"]["records"] == RECORDS
    # realized, as the report says it, against the disk: within 2%
    assert last["copy_bytes_per_record"] == pytest.approx(dst_bpr, rel=0.02)
    assert last["source_bytes_per_record"] == pytest.approx(src_bpr, rel=0.02)
    assert last["disk_ratio"] == pytest.approx(src_bpr / dst_bpr, rel=0.02)
    # the copier's figures: every record, their bytes as read back
    copier = last["copier"]
    assert copier["records"] == RECORDS
    assert copier["record_bytes"] == pytest.approx(_record_bytes(src_recs), rel=0.01)
    assert copier["cpu_s"] > 0
    # the prediction (on every record here) within 3% of the realized
    pred = doc["prediction"]
    assert pred["records"] == RECORDS and pred["codec"] == "zstd"
    assert pred["batch_max_bytes"] == conf.routes[0].destinations[0].batch.max_bytes
    assert pred["bytes_per_record"] == pytest.approx(dst_bpr, rel=0.03)
    assert pred["ratio"] == pytest.approx(_record_bytes(src_recs) / _disk(kafka, dest, 2), rel=0.03)
    figures = {f["name"]: f for f in doc["figures"]}
    assert figures["stored bytes per record"]["realized"] == pytest.approx(dst_bpr, rel=0.02)
    assert abs(figures["stored bytes per record"]["difference"]) < 0.03
    assert figures["disk ratio"]["predicted"] == pytest.approx(src_bpr / pred["bytes_per_record"], rel=0.02)
    # savings: the source's records as the copy stores them
    assert doc["savings"]["disk_saved_bytes"] == pytest.approx((src_bpr - dst_bpr) * RECORDS, rel=0.03)
    assert [(g["group"], g["stage"]) for g in doc["groups"]] == [(group, "destination")]
    assert doc["stage"] == "finished"
    html = (tmp_path / "r" / "index.html").read_text()
    assert html.count('src="data:image/png;base64,') == 3
    # the other formats print the same figures
    md = migrate("report", "--config", path, "--format", "markdown").stdout
    assert f"| stored bytes per record | {pred['bytes_per_record']:,.1f} B |" in md
    table = migrate("report", "--config", path).stdout
    assert "predicted against realized" in table and "disk saved:" in table
