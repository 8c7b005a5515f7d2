"""A sink's figures for the offset map's health record (what `migrate report` reads as realized): records, their bytes
and the batches' bytes all as of one statistics emission, and the lane's CPU."""

from __future__ import annotations

from typing import Any

from transcoder import config as cfg
from transcoder.kafka.offset_map_topic import CopierFigures
from transcoder.kafka.statistics import TopicProduce, Window
from transcoder.kafka.writer.factory import sink_parts
from transcoder.pipeline.routes import plan


class _Metrics:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def _parts(cpu: Any = None) -> Any:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"},
                      "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]}, environ={})
    targets = tuple(t for lane in plan(conf, ["s"]).lanes for t in lane.targets)
    return sink_parts(conf, "l", targets, _Metrics(), create=lambda part, make, start: make(), cpu=cpu), targets


def _emission(records: int, record_bytes: int, batches: list[float]) -> TopicProduce:
    return TopicProduce(batch_bytes=Window.from_values(batches), batch_records=Window.from_values([1.0]),
                        record_bytes_total=record_bytes, records_total=records)


def test_the_figures_are_those_of_the_last_statistics_emission_and_the_lane_s_cpu_now():
    cpu = [1.5]
    parts, targets = _parts(cpu=lambda: cpu[0])
    dest = targets[0].topic_for("s")
    assert parts.figures(dest) == CopierFigures(0, 0, 0, 1.5)  # nothing emitted yet: no records, no bytes
    parts.deliveries.acked_total[dest] = 900  # acknowledgements run ahead of the emissions: not mixed in
    parts.deliveries.produced({dest: _emission(500, 50_000, [4_000.0, 2_000.0])})
    parts.deliveries.produced({dest: _emission(800, 80_000, [3_000.0])})  # cumulative counts; batches per interval
    cpu[0] = 2.25
    assert parts.figures(dest) == CopierFigures(records=800, record_bytes=80_000, wire_bytes=9_000, cpu_s=2.25)
    parts.deliveries.produced({"elsewhere": _emission(5, 5, [5.0])})  # another producer's topic: not this one's
    assert parts.figures(dest).records == 800


def test_without_a_cpu_source_the_cpu_is_not_measured():
    parts, targets = _parts()
    assert parts.figures(targets[0].topic_for("s")).cpu_s is None
