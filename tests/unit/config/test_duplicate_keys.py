"""A key given twice in one mapping of a config file is an error naming both lines (issue 42): PyYAML keeps the
last silently, so `{codec: zstd, codec: lz4}` planned an lz4 lane. Merge keys (`<<`) work as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from transcoder.config import load, parse
from transcoder.config.loading import read_yaml
from transcoder.errors import ConfigError

HEAD = "cluster:\n  bootstrap_servers: k:9092\n"


def error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load(path, environ={})
    return str(info.value).replace(str(path), "config.yaml")


def test_a_top_level_key_given_twice(tmp_path):
    text = HEAD + "group_id: a\nroutes: [{source: s, destinations: [{codec: zstd}]}]\ngroup_id: b\n"
    assert error(tmp_path, text) == "config.yaml: line 5: key 'group_id' given twice (first at line 3)"


def test_a_key_given_twice_in_a_flow_mapping_of_a_list_names_the_columns(tmp_path):
    text = HEAD + "routes:\n  - source: s\n    destinations:\n      - {codec: zstd, codec: lz4}\n"
    assert error(tmp_path, text) == ("config.yaml: line 6, column 23: key 'codec' given twice "
                                     "(first at line 6, column 10)")


def test_a_key_given_twice_deep_in_a_list_of_mappings(tmp_path):
    text = HEAD + ("routes:\n"
                   "  - source: s\n"
                   "    destinations:\n"
                   "      - codec: zstd\n"
                   "      - codec: lz4\n"
                   "        batch:\n"
                   "          linger_ms: 5\n"
                   "          max_records: 10\n"
                   "          linger_ms: 50\n")
    assert error(tmp_path, text) == "config.yaml: line 11: key 'linger_ms' given twice (first at line 9)"


def test_keys_equal_as_yaml_values_are_the_same_key(tmp_path):
    text = HEAD + "routes: [{source: s, destinations: [{codec: zstd}]}]\ncluster: {}\n"
    assert error(tmp_path, text) == "config.yaml: line 4: key 'cluster' given twice (first at line 1)"
    text = HEAD + "routes: [{source: s, destinations: [{codec: zstd}]}]\nspark: {conf: {1: a, 0x1: b}}\n"
    assert error(tmp_path, text) == ("config.yaml: line 4, column 22: key 1 given twice (first at line 4, "
                                     "column 16)")


def test_a_mapping_in_an_environment_override_is_checked_too():
    with pytest.raises(ConfigError) as info:
        parse({"cluster": {"bootstrap_servers": "k"}, "routes": [{"source": "s", "destinations": [{"codec": "zstd"}]}]},
              environ={"TRANSCODER__METRICS": "{port: 1, port: 2}"})
    assert str(info.value) == ("TRANSCODER__METRICS: line 1, column 11: key 'port' given twice (first at line 1, "
                               "column 2)")


def test_an_environment_override_that_is_not_yaml_is_one_line():
    with pytest.raises(ConfigError) as info:
        parse({"cluster": {"bootstrap_servers": "k"}}, environ={"TRANSCODER__METRICS": "{port: 1"})
    assert str(info.value).startswith("TRANSCODER__METRICS: not a valid YAML flow list or mapping: ")


def test_merge_keys_still_merge_and_a_key_beside_them_overrides(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(HEAD + ("routes:\n"
                            "  - source: s\n"
                            "    destinations:\n"
                            "      - &z {codec: zstd, level: 3}\n"
                            "      - <<: *z\n"
                            "        level: 5\n"
                            "        name: z5\n"
                            "      - <<: [*z]\n"
                            "        codec: lz4\n"
                            "        level: null\n"
                            "        name: l\n"
                            "  - source: t\n"
                            "    destinations: [*z]\n"))
    c = load(path, environ={})
    assert [(d.codec, d.level, d.name) for r in c.routes for d in r.destinations] == [
        ("zstd", 3, None), ("zstd", 5, "z5"), ("lz4", None, "l"), ("zstd", 3, None)]


def test_a_merge_key_given_twice_is_a_key_given_twice(tmp_path):
    text = HEAD + "a: &a {x: 1}\nb: {<<: *a, <<: *a}\n"
    assert error(tmp_path, text) == "config.yaml: line 4, column 13: key '<<' given twice (first at line 4, column 5)"


def test_the_line_of_every_key_and_entry():
    data, lines = read_yaml("a:\n  - b: 1\n    c: [x, y]\n  - &m {d: 2, g: 1}\ne:\n  <<: *m\n  f: 3\n  g: 4\n")
    assert data == {"a": [{"b": 1, "c": ["x", "y"]}, {"d": 2, "g": 1}], "e": {"d": 2, "f": 3, "g": 4}}
    assert lines == {("a",): 1, ("a", 0): 2, ("a", 0, "b"): 2, ("a", 0, "c"): 3, ("a", 0, "c", 0): 3,
                     ("a", 0, "c", 1): 3, ("a", 1): 4, ("a", 1, "d"): 4, ("a", 1, "g"): 4,
                     ("e",): 5, ("e", "d"): 4, ("e", "f"): 7, ("e", "g"): 8}


def test_aliases_of_aliases_are_read_at_once():
    text = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
    data, lines = read_yaml(text)  # 9**9 paths through the last one: walked once per node
    assert len(data) == 9 and lines[("i",)] == 9


def test_an_empty_file_reads_as_nothing():
    assert read_yaml("") == (None, {})
