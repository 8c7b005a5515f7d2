"""The summary a one-shot run ends with: a line per lane from the /status document."""

from __future__ import annotations

import json

from transcoder.report.run_summary import from_status


def dest(topic: str, records: int, record_bytes: float, compressed: float) -> dict:
    return {"topic": topic, "records_out": records, "record_bytes_out": record_bytes, "compressed_bytes": compressed}


DOC = {"lanes": [
    {"name": "zstd", "state": "caught-up", "records": 50_000, "source_bytes": 13_400_000,
     "cpu_seconds_per_million_records": 2.314, "destinations": [dest("web.zstd-6", 50_000, 13_600_000, 1_600_000)]},
    {"name": "fan", "state": "stopped", "records": 1_000, "source_bytes": 250_000,
     "cpu_seconds_per_million_records": None,
     "destinations": [dest("web.lz4", 1_000, 260_000, 52_000), dest("web.none", 1_000, 260_000, 0)]},
]}


def test_a_line_per_lane_with_records_bytes_ratio_cpu_and_time():
    zstd, fan = from_status(DOC, 4.24)
    assert zstd.line() == ("lane zstd: 50,000 records, 13.40 MB in, 1.60 MB out (8.50x), "
                           "2.31 s CPU per 1M records, 4.2 s")
    # several destinations: each by its topic; a lane that did not catch up says so; unknowns said as such
    assert fan.line() == ("lane fan (stopped): 1,000 records, 0.25 MB in, web.lz4 0.05 MB out (5.00x), "
                          "web.none 0.00 MB out, CPU per 1M records unknown, 4.2 s")


def test_the_same_figures_as_a_dict_for_the_log_event():
    zstd = from_status(DOC, 4.0)[0].as_dict()
    assert json.loads(json.dumps(zstd)) == {
        "lane": "zstd", "state": "caught-up", "records": 50_000, "bytes_in": 13_400_000, "bytes_out": 1_600_000,
        "cpu_seconds_per_million_records": 2.314, "elapsed_seconds": 4.0,
        "destinations": [{"topic": "web.zstd-6", "records": 50_000, "record_bytes": 13_600_000,
                          "compressed_bytes": 1_600_000, "ratio": 8.5}]}
