"""kafka.writer.build_sink: the one place that reads the guarantee and the copy path; one sink class per mode, the
transactional ones TransactionalSinks, and the offset map and dead-letter topic attached as parts (no broker)."""

from __future__ import annotations

from typing import Any

import pytest

from transcoder import config as cfg
from transcoder.errors import DeliveryError, TranscoderError
from transcoder.kafka.writer import TransactionalSink, build_sink
from transcoder.kafka.writer.failures import Failure
from transcoder.kafka.writer.offset_map import NoOffsetMap, RecordedMap
from transcoder.kafka.writer.record_sets import RecordSetsSink, TransactionalRecordSetsSink
from transcoder.kafka.writer.records import RecordsSink, TransactionalRecordsSink
from transcoder.pipeline.routes import plan


class _Metrics:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def _sink(*codecs: str, batched: bool, **settings: Any) -> Any:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"}, **settings,
                      "routes": [{"source": "s", "destinations": [{"codec": c} for c in codecs]}]}, environ={})
    targets = tuple(t for lane in plan(conf, ["s"]).lanes for t in lane.targets)
    return build_sink(conf, "l", targets, _Metrics(), create=lambda part, make, start: make(), batched=batched)


@pytest.mark.parametrize(("guarantee", "batched", "kind"), [
    ("at-least-once", False, RecordsSink), ("at-least-once", True, RecordSetsSink),
    ("exactly-once", False, TransactionalRecordsSink), ("exactly-once", True, TransactionalRecordSetsSink)])
def test_each_mode_has_its_sink_and_only_exactly_once_is_transactional(guarantee, batched, kind):
    w = _sink("lz4", batched=batched, guarantee=guarantee)
    assert type(w) is kind
    assert isinstance(w, TransactionalSink) == (guarantee == "exactly-once")
    if guarantee == "exactly-once":
        assert w.producers == [] and w.error_trackers == []  # its producer is made per assignment
    else:
        assert len(w.producers) == 1
    w.close(0)


def test_exactly_once_takes_one_destination_per_lane():
    with pytest.raises(TranscoderError, match="exactly-once needs one destination per lane, not 2"):
        _sink("lz4", "zstd", batched=True, guarantee="exactly-once")


def test_the_records_path_sends_zstd_levels_librdkafka_refuses_through_transcoders_producer():
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"},
                      "routes": [{"source": "s", "destinations": [{"codec": "zstd", "level": 19}, {"codec": "lz4"}]}]},
                     environ={})
    targets = tuple(t for lane in plan(conf, ["s"]).lanes for t in lane.targets)
    w = build_sink(conf, "l", targets, _Metrics(), create=lambda part, make, start: make(), batched=False)
    assert isinstance(w, RecordsSink)
    assert [type(p).__name__ for p in w.producers] == ["BatchProducer", "Producer"]
    assert w.own == [w.producers[0]] and len(w.error_trackers) == 1  # librdkafka's tracks the cluster's reach
    w.close(0)


def test_no_migration_section_no_map_and_a_map_otherwise():
    assert isinstance(_sink("lz4", batched=True).offset_map, NoOffsetMap)
    assert _sink("lz4", batched=True).flush_map(0) is True
    w = _sink("lz4", batched=True, group_id="g", migration={})
    assert isinstance(w.offset_map, RecordedMap)
    w.close(0)


def test_without_a_dead_letter_topic_a_failed_record_stops_the_engine_and_is_counted():
    w = _sink("lz4", batched=True)
    w.parts.failures.failed(Failure(("s", 0), 7, "s.lz4", "INVALID_RECORD", "refused", None))
    assert w.ledger.held == {("s", 0): {7: 1}}  # never committed past
    with pytest.raises(DeliveryError, match=r"record s \[0\] offset 7 could not be written to s.lz4: refused "
                                            r"\(errors.tolerance=none\)"):
        w.handle_failures()
    assert w.parts.failures.errors_total == 1 and w.dead_lettered == 0
    w.close(0)


def test_a_records_sink_refuses_record_sets_and_a_record_sets_sink_records():
    with pytest.raises(TranscoderError, match="takes records, not record sets"):
        _sink("lz4", batched=False).write_stored(("s", 0), [], 0.0)
    with pytest.raises(TranscoderError, match="takes record sets"):
        _sink("lz4", batched=True).write([], lambda e: None)
