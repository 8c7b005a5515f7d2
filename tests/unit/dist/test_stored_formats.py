"""Stored formats across versions (docs/upgrading.md): records as transcoder 0.1.0 wrote them are read as they were;
one a newer transcoder wrote (a higher format version) is refused in one line naming where it is and the version."""

from __future__ import annotations

import json

import pytest

from tests.support.configs import make_config
from transcoder.errors import ConfigError, MigrationError, TopicError
from transcoder.kafka.offset_map_topic import HEALTH_FORMAT_VERSION, LaneHealth, decode_entry, decode_health
from transcoder.migrate.state import STATE_FORMAT_FIELD, STATE_FORMAT_VERSION, decode_value, encode_value
from transcoder.pipeline import routes
from transcoder.pipeline.offset_runs import FORMAT_VERSION, MapEntry, Recreation, Run
from transcoder.spark import checkpoints

WHERE = {"topic": "transcoder.offset-map", "partition": 0, "offset": 41}

# An offset-map entry exactly as 0.1.0 wrote it (MapEntry.encode): format 1, a run, a source id, a recreation.
MAP_ENTRY_0_1_0 = (b'{"v":1,"source":"orders","destination":"orders.zstd-6","partition":2,"runs":[[100,90,50]],'
                   b'"sid":"QkTk6Yz1S7yx0bYq3m3o4g","recreated":{"old":"a","new":"b","at":7,"records":3,'
                   b'"continued":false}}')


def _one_line(exc: pytest.ExceptionInfo[Exception]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_an_offset_map_entry_of_0_1_0_is_read() -> None:
    e = decode_entry(MAP_ENTRY_0_1_0, **WHERE)
    assert e == MapEntry("orders", "orders.zstd-6", 2, (Run(100, 90, 50),), (), "QkTk6Yz1S7yx0bYq3m3o4g",
                         Recreation("a", "b", 7, 3, False))
    assert FORMAT_VERSION == 1 and json.loads(e.encode())["v"] == 1  # this version writes what it reads


def test_an_offset_map_entry_of_a_newer_format_is_refused_in_one_line() -> None:
    newer = json.loads(MAP_ENTRY_0_1_0) | {"v": FORMAT_VERSION + 1, "shape": "unknown to 0.1.0"}
    with pytest.raises(TopicError) as exc:
        decode_entry(json.dumps(newer).encode(), **WHERE)
    assert _one_line(exc) == ("offset-map topic transcoder.offset-map partition 0 offset 41: written in offset-map "
                              "format version 2 by a newer transcoder; this one reads version 1: upgrade transcoder "
                              "to read it (docs/upgrading.md)")
    assert (exc.value.topic, exc.value.partition, exc.value.offset) == ("transcoder.offset-map", 0, 41)


@pytest.mark.parametrize("value", [b'{"source":"a"}', b'{"v":0}', b'{"v":"2"}', b"[1]", b"\xff"])
def test_an_offset_map_record_that_is_no_entry_is_not_taken_for_a_newer_one(value: bytes) -> None:
    with pytest.raises(TopicError) as exc:
        decode_entry(value, **WHERE)
    assert "offset 41: " in _one_line(exc) and "newer" not in str(exc.value)


def test_lane_health_of_0_1_0_without_a_version_is_read_and_this_version_writes_one() -> None:
    before = b'{"errors_total": 3, "last_error_ms": 1700000000000, "at_ms": 1700000005000}'
    assert decode_health(before, "orders.zstd-6", **WHERE) == LaneHealth("orders.zstd-6", 3, 1700000000000,
                                                                          1700000005000)
    now = json.dumps({"v": HEALTH_FORMAT_VERSION, "errors_total": 0, "last_error_ms": None, "at_ms": 5}).encode()
    assert decode_health(now, "d", **WHERE) == LaneHealth("d", 0, None, 5)


def test_lane_health_of_a_newer_format_is_refused_in_one_line() -> None:
    newer = b'{"v": 2, "errors": {"total": 3}}'
    with pytest.raises(TopicError) as exc:
        decode_health(newer, "orders.zstd-6", **WHERE)
    assert _one_line(exc).startswith("offset-map topic transcoder.offset-map partition 0 offset 41: lane health "
                                     "written in format version 2 by a newer transcoder; this one reads version 1")
    with pytest.raises(TopicError, match="offset 41: not a lane health record"):
        decode_health(b"{}", "d", **WHERE)


STATE = {"migration": "orders.zstd-6", "key": "orders.zstd-6/group/billing", "topic": "transcoder.migrations",
         "offset": 17}


def test_a_state_value_of_0_1_0_without_a_version_is_read_as_it_was() -> None:
    before = {"stage": "source", "source_offsets": {"0": 12}, "moved_ms": None}
    stored = json.dumps(before, separators=(",", ":"), sort_keys=True).encode()  # 0.1.0's encoding
    assert decode_value(stored, **STATE) == before


def test_a_state_value_round_trips_with_its_version_kept_out_of_the_value() -> None:
    value = {"stage": "destination", "source_offsets": {"1": 5}, "v": 7}  # `v`: a field like any other here
    stored = encode_value(value)
    assert json.loads(stored)[STATE_FORMAT_FIELD] == STATE_FORMAT_VERSION == 1
    assert decode_value(stored, **STATE) == value
    with pytest.raises(ValueError, match="format version"):
        encode_value({STATE_FORMAT_FIELD: 3})


def test_a_state_value_of_a_newer_format_is_refused_in_one_line() -> None:
    with pytest.raises(MigrationError) as exc:
        decode_value(b'{"_format":2,"stage":"moving"}', **STATE)
    assert _one_line(exc) == ("migration orders.zstd-6: state record orders.zstd-6/group/billing at partition 0 "
                              "offset 17 of topic transcoder.migrations was written in state format version 2 by a "
                              "newer transcoder; this one reads version 1: upgrade transcoder to go on with this "
                              "migration (docs/upgrading.md)")
    assert (exc.value.topic, exc.value.partition, exc.value.offset) == ("transcoder.migrations", 0, 17)
    with pytest.raises(MigrationError, match="offset 17 of topic transcoder.migrations is not a JSON object"):
        decode_value(b"[]", **STATE)


BROKER = type("K", (), {"bootstrap": "127.0.0.1:1"})()


def _mark() -> dict[str, object]:
    conf = make_config(BROKER, [{"source": "orders", "destinations": [{"codec": "zstd", "name": "copy"}]}])
    return checkpoints.mark(routes.plan(conf, ["orders"]).lanes[0])


def test_a_checkpoint_mark_of_0_1_0_without_a_version_fits_and_a_newer_ones_is_refused() -> None:
    expected = _mark()
    assert checkpoints.mismatch("/c/copy", dict(expected), expected) is None  # 0.1.0's mark: no `v`
    assert checkpoints.mismatch("/c/copy", {"v": checkpoints.MARK_VERSION, **expected}, expected) is None
    problem = checkpoints.mismatch("/c/copy", {**expected, "v": 2}, expected)
    assert problem == ("checkpoint /c/copy was written by a newer transcoder (transcoder-lane.json format version 2; "
                       "this one reads version 1): upgrade transcoder to go on from it (docs/upgrading.md), or set "
                       "spark.checkpoint_location to a new path")


def test_spark_offset_logs_of_version_1_are_read_and_others_refused() -> None:
    log = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1795906661914,"conf":{}}\n{"orders":{"1":40,"0":12}}\n'
    assert checkpoints.offset_log(log, "/c/copy/offsets/3") == {("orders", 0): 12, ("orders", 1): 40}
    with pytest.raises(ConfigError) as exc:
        checkpoints.offset_log(log.replace("v1", "v2", 1), "/c/copy/offsets/3")
    assert _one_line(exc).startswith("Spark offset log /c/copy/offsets/3 has version v2, not v1")
