"""What the writer's batched path reports of a delivered batch's latency (issue 42, item 5): a batch that mixes the
backlog's tail with the first new records (re-batched together) times its new records only, each record new or
backlog by its own timestamp. On the old code the batch was classified by its newest record and timed whole: its
backlog's 60-s age was the p99 of "new records"."""

from __future__ import annotations

from typing import Any

import transcoder_native as native

from transcoder import config as cfg
from transcoder.kafka.writer import build_sink
from transcoder.kafka.writer.metrics import LATENCY_SAMPLING
from transcoder.kafka.writer.record_sets import RecordSetsSink
from transcoder.pipeline.routes import plan

START_MS = 1_700_000_000_000  # the lane's start


class _Metrics:
    """Records what the writer reports of latency; the rest is ignored."""

    def __init__(self) -> None:
        self.latencies: list[tuple[float, float]] = []
        self.backlog = 0.0

    def latency(self, destination: str, seconds: float, weight: float = 1.0) -> None:
        self.latencies.append((seconds, weight))

    def backfill(self, destination: str, weight: float = 1.0) -> None:
        self.backlog += weight

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


class _Sink:
    """A batch producer that keeps the sections it is handed; acknowledged when the test says."""

    reported_at = (START_MS + 300) / 1000  # epoch s of the delivery report: 300 ms after the lane's start

    def __init__(self) -> None:
        self.sections: list[Any] = []

    def produce_sections(self, topic: str, partition: int, sections: Any) -> None:
        self.sections.extend(sections)


def test_a_batch_of_backlog_and_new_records_times_only_the_new_ones():
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"}, "group_id": "g",
                      "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    targets = tuple(t for lane in plan(conf, ["s"]).lanes for t in lane.targets)
    metrics = _Metrics()
    w = build_sink(conf, "l", targets, metrics, create=lambda part, make, start: make(), batched=True,
                   start_ms=START_MS)
    assert isinstance(w, RecordSetsSink)
    sink = _Sink()
    w.batching.routes = {s: [(sink, dest, t) for _, dest, t in routes]
                         for s, routes in w.batch_routes.items()}
    # 3,000 records seeded a minute before the lane started, then 50 produced after it (1 ms apart): one fetch
    stamps = [START_MS - 60_000] * 3000 + [START_MS + 200 + i for i in range(50)]
    data = native.encode_batch([(None, b"v" * 50, [], ts) for ts in stamps], codec="none", base_offset=0)
    w.write_stored(("s", 0), native.decode_stored(data, 0), now=0.0)
    w.tick(1e9, flush=True)
    assert [len(s) for s in sink.sections] == [3050]  # one batch mixes them
    w.batch_reports.delivered(None, "s.zstd", 0, 0, sink.sections[0])
    ages = [s for s, _ in metrics.latencies]
    assert ages and max(ages) <= 0.1 + 1e-9, ages  # the new records waited 51..100 ms, the backlog 60 s
    assert sum(wt for _, wt in metrics.latencies) == 50 / LATENCY_SAMPLING
    assert metrics.backlog == 3000 / LATENCY_SAMPLING
