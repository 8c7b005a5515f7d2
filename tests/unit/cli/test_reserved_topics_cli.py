"""`transcoder validate` (and every command that reads a config) refuses reserved topics and keys given twice
before it connects (issue 42): one line naming the file, the line and what is wrong, exit 2, no traceback.

Nothing listens on the config's bootstrap address: a command that got as far as connecting would say so instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import one_line, run_cli

HEAD = "cluster:\n  bootstrap_servers: 127.0.0.1:1\ngroup_id: tour\nmetrics: {port: 0}\n"


def _refusal(tmp_path: Path, body: str, *command: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(HEAD + body)
    proc = run_cli(*(command or ("validate",)), "-c", str(path), timeout=60)
    assert proc.returncode == 2, proc.stderr
    return one_line(proc).removeprefix(f"transcoder: error: {path}: ")


@pytest.mark.parametrize("command", [("validate",), ("run",), ("migrate", "plan")])
def test_the_offset_map_topic_as_a_destination_is_refused(tmp_path, command):
    body = ("routes:\n"                                   # line 5
            "  - source: web.access\n"
            "    destinations:\n"
            "      - {codec: zstd, level: 6}\n"
            "      - codec: lz4\n"
            "        topic: tour.offset-map\n"            # line 10
            "migration: {}\n")
    assert _refusal(tmp_path, body, *command) == (
        "line 10: routes.0.destinations.1.topic: destination tour.offset-map is this config's offset-map topic "
        "(migration.offset_map_topic, default <group_id>.offset-map): no route may read or write it")


def test_consumer_offsets_as_a_source_is_refused(tmp_path):
    body = "routes:\n  - source: __consumer_offsets\n    destinations: [{codec: zstd, topic: offsets-copy}]\n"
    assert _refusal(tmp_path, body) == (
        "line 6: routes.0.source: source __consumer_offsets is Kafka's internal topic of the consumer groups' "
        "committed offsets: no route may read or write it")


def test_a_dead_letter_topic_equal_to_a_destination_is_refused(tmp_path):
    body = ("routes:\n"
            "  - source: orders\n"
            "    destinations:\n"
            "      - codec: zstd\n"                       # line 8: the destination orders.zstd
            "errors:\n"
            "  tolerance: all\n"
            "  dlq_topic: orders.zstd\n")
    assert _refusal(tmp_path, body) == (
        "line 8: routes.0.destinations.0: destination orders.zstd is this config's dead-letter topic "
        "(errors.dlq_topic): no route may read or write it")


def test_a_key_given_twice_names_both_lines(tmp_path):
    body = ("routes:\n"
            "  - source: orders\n"
            "    destinations:\n"
            "      - codec: zstd\n"                       # line 8
            "        level: 3\n"
            "        codec: lz4\n")                       # line 10
    assert _refusal(tmp_path, body) == "line 10: key 'codec' given twice (first at line 8)"


def test_a_group_id_given_twice_names_both_lines(tmp_path):
    body = "routes: [{source: orders, destinations: [{codec: zstd}]}]\ngroup_id: other\n"
    assert _refusal(tmp_path, body) == "line 6: key 'group_id' given twice (first at line 3)"


def test_validate_lists_what_a_pattern_passes_over(capsys):
    from transcoder.cli.run import _print_plan
    from transcoder.config import parse
    from transcoder.engine.validation import plan_data
    from transcoder.kafka.provisioning import DestinationTopic, Provision
    from transcoder.pipeline.routes import plan

    conf = parse({"cluster": {"bootstrap_servers": "k:9092"}, "group_id": "tour", "migration": {},
                  "routes": [{"source_pattern": "web.*|tour.*|__.*", "destinations": [{"codec": "zstd"}]}]},
                 environ={})
    p = plan(conf, ["web.access", "tour.offset-map", "__consumer_offsets"])
    dest = DestinationTopic("web.access.zstd", "web.access", "route0.zstd", "zstd", 3, False, {}, "producer")
    _print_plan(plan_data(conf, p, Provision(sources={}, destinations=[dest], dlq=None), [], engine="service",
                          offline=False))
    out = capsys.readouterr().out
    assert ("routes.0.source_pattern passes over __consumer_offsets: Kafka's internal topic of the consumer groups' "
            "committed offsets") in out
    assert ("routes.0.source_pattern passes over tour.offset-map: this config's offset-map topic "
            "(migration.offset_map_topic, default <group_id>.offset-map)") in out
    assert "passes over web.access" not in out


@pytest.mark.parametrize("command", [("migrate", "plan"), ("migrate", "status")])
def test_a_config_that_is_not_utf8_or_yaml_is_one_line_for_migrate_too(tmp_path, command):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe\x00cluster: {}\n")
    proc = run_cli(*command, "-c", str(path), timeout=60)
    assert proc.returncode == 2
    assert one_line(proc) == (f"transcoder: error: config file {path} is not UTF-8 text (invalid start byte at byte "
                              "0)")
    path.write_text("cluster: {bootstrap_servers: k}\nstart: 2020-13-45\n")
    proc = run_cli(*command, "-c", str(path), timeout=60)
    assert proc.returncode == 2
    assert one_line(proc) == (f"transcoder: error: {path}: a value is not valid YAML: month must be in 1..12 (quote "
                              "it to keep it a string)")
