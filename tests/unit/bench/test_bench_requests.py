"""bench.requests: counting a copier's requests from the broker's request log."""

from __future__ import annotations

import json

from bench import figures, requests
from bench.requests import ApiLoad


def _line(api: str, client: str, local: float, total: float) -> str:
    desc = {"isForwarded": False,
            "requestHeader": {"requestApiKey": 0, "requestApiVersion": 11, "correlationId": 7, "clientId": client,
                              "requestApiKeyName": api},
            "request": "", "response": "", "connection": "127.0.0.1:9092-127.0.0.1:5000-3",
            "totalTimeMs": total, "requestQueueTimeMs": 0.1, "localTimeMs": local, "remoteTimeMs": 0.0,
            "throttleTimeMs": 0, "responseQueueTimeMs": 0.0, "sendTimeMs": 0.0, "securityProtocol": "PLAINTEXT",
            "principal": "User:ANONYMOUS", "listener": "PLAINTEXT",
            "clientInformation": {"softwareName": "librdkafka", "softwareVersion": "2.16.0"}}
    return f"[2026-11-23T20:00:00.000+0000] [data-plane-kafka-request-handler-0] DEBUG kafka.request.logger - " \
           f"Completed request:{json.dumps(desc)}"


def test_requests_are_counted_by_api_without_the_bench_s_own_clients():
    lines = [_line("PRODUCE", "transcoder-s.zstd", 1.5, 2.0),
             _line("PRODUCE", "transcoder-s.zstd", 0.5, 1.0),
             _line("FETCH", "transcoder-lane", 0.2, 500.0),
             _line("LIST_OFFSETS", "bench", 0.1, 0.2),  # the bench's progress poll
             "[2026-11-23T20:00:00.000+0000] INFO [Log partition=s-0] Rolled new log segment",
             _line("FETCH", "transcoder-lane", 0.2, 500.0)[:80]]  # cut by the byte range's end
    assert requests.parse(lines) == {"PRODUCE": ApiLoad("PRODUCE", 2, 2.0, 3.0),
                                     "FETCH": ApiLoad("FETCH", 1, 0.2, 500.0)}


def test_read_range_reads_what_a_copy_added(tmp_path):
    log = tmp_path / "broker.log"
    log.write_text(_line("METADATA", "x", 0.1, 0.1) + "\n")
    start = log.stat().st_size
    with log.open("a") as f:
        f.write(_line("PRODUCE", "x", 1.0, 1.0) + "\n")
    assert requests.parse(requests.read_range(log, start, log.stat().st_size)) == {
        "PRODUCE": ApiLoad("PRODUCE", 1, 1.0, 1.0)}


def test_the_table_gives_medians_per_million_records_and_folds_small_apis():
    def run(produce: int, local: float) -> figures.CopyRun:
        return figures.CopyRun(copier="transcoder", codec="zstd", records=500_000, uncompressed_bytes=1, seconds=1.0,
                               cpu_seconds=1.0, startup_seconds=0.1, disk_bytes=1,
                               requests={"PRODUCE": ApiLoad("PRODUCE", produce, local, local),
                                         "METADATA": ApiLoad("METADATA", 1, 0.001, 0.001)})
    table = figures.requests_table([run(100, 10.0), run(300, 30.0), run(200, 20.0)], ["zstd"])
    assert "| zstd | transcoder | PRODUCE | 400 | 40.0 | 40 |" in table  # median 200 per 500k
    assert "| zstd | transcoder | other | 2 | 0.0 | 0 |" in table
    assert "| zstd | transcoder | **all** | 402 | 40.0 | 40 |" in table
