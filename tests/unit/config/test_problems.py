"""Config problems in words (transcoder.config.problems): one per line, an unknown key with its did-you-mean and
merged with the required key it was meant as, a union's reasons as one problem, cluster.config's and -X's every
property problem, and never a secret's value."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from transcoder.cli.main import properties
from transcoder.config import Config, Destination, Route, parse
from transcoder.config.problems import ConfigProblems, Problem, did_you_mean, model_at, render, split_loc
from transcoder.errors import ConfigError

SECRET = "hunter2-never-shown"


def make(**top: Any) -> dict[str, Any]:
    return {"cluster": {"bootstrap_servers": "k1:9092"},
            "routes": [{"source": "orders", "destinations": [{"codec": "zstd"}]}], **top}


def problems(raw: Any, environ: dict[str, str] | None = None) -> list[Problem]:
    with pytest.raises(ConfigProblems) as info:
        parse(raw, source="t.yaml", environ=environ or {})
    assert info.value.exit_code == 2
    return list(info.value.problems)


def lines(raw: Any, environ: dict[str, str] | None = None) -> list[str]:
    return [str(p) for p in problems(raw, environ)]


# ------------------------------------------------------------------------------------------ did-you-mean

@pytest.mark.parametrize("key,keys,meant", [
    ("destinaton", ["source", "source_pattern", "destinations"], "destinations"),
    ("Codec", ["codec", "name", "level"], "codec"),
    ("dlq", ["tolerance", "dlq_topic"], "dlq_topic"),            # cut short: the one key it begins
    ("bootstrap.servers", ["bootstrap_servers", "config"], "bootstrap_servers"),
    ("xyz", ["tolerance", "dlq_topic"], None),
    ("ma", ["max_bytes", "max_records"], None),                  # too short to say which
])
def test_did_you_mean(key, keys, meant):
    assert did_you_mean(key, keys) == meant


def test_a_misspelt_required_key_is_one_problem_not_an_unknown_and_a_missing_one():
    raw = make(routes=[{"source": "orders", "destinaton": [{"codec": "zstd"}]}])
    assert lines(raw) == ["routes.0.destinaton: unknown key `destinaton` (did you mean `destinations`?)"]


def test_two_misspelt_required_keys_at_two_levels_are_two_problems():
    raw = {"clustr": {"bootstrap_servers": "k"}, "routes": [{"source": "s", "destinations": [{"codek": "zstd"}]}]}
    assert lines(raw) == ["clustr: unknown key `clustr` (did you mean `cluster`?)",
                          "routes.0.destinations.0.codek: unknown key `codek` (did you mean `codec`?)"]


def test_an_unknown_key_near_no_key_lists_the_keys_of_a_small_section_and_the_missing_key_stays():
    raw = make(errors={"tolerance": "all", "zzz": "x"})
    assert lines(raw) == ["errors.zzz: unknown key `zzz`: the keys here are `tolerance`, `dlq_topic`",
                          "errors: tolerance all needs a dlq_topic, or failed records would be dropped"]


def test_an_unknown_key_that_is_not_near_a_missing_one_leaves_the_missing_one_reported():
    raw = {"cluster": {"bootstrap_servers": "k"}, "routes": [{"source": "s", "destinations": [{"levle": 3}]}]}
    assert lines(raw) == ["routes.0.destinations.0.codec: Field required",
                          "routes.0.destinations.0.levle: unknown key `levle` (did you mean `level`?)"]


def test_the_issue_s_eight_problems_on_one_line_are_a_line_each():
    # issue 44: unknown keys beside "Field required" for the keys meant, eight problems on one ~600-character line
    raw = {"clusters": {"bootstrap_servers": "k"}, "group": "g", "route": [],
           "errors": {"tolerence": "all"}, "metrics": {"prot": 1}}
    text = str(pytest.raises(ConfigError, parse, raw, source="t.yaml", environ={}).value)
    first, *rest = text.split("\n")
    assert first == f"t.yaml: {len(rest)} problems:"
    assert rest == [
        "  clusters: unknown key `clusters` (did you mean `cluster`?)",  # in the place of the key it was meant as
        "  route: unknown key `route` (did you mean `routes`?)",
        "  errors.tolerence: unknown key `tolerence` (did you mean `tolerance`?)",
        "  metrics.prot: unknown key `prot` (did you mean `port`?)",
        "  group: unknown key `group` (did you mean `group_id`?)",
    ]
    assert "Extra inputs" not in text and "Field required" not in text


# ---------------------------------------------------------------------------------------------- unions

def test_a_union_s_reasons_are_one_problem_of_its_key():
    assert lines(make(spark={"conf": {"spark.x": [1]}})) == [
        "spark.conf.spark.x: Input should be a valid string; or input should be a valid integer; or input should be a "
        "valid number; or input should be a valid boolean"]


def test_split_loc_and_model_at_walk_fields_lists_and_mappings():
    assert split_loc(Config, ("start", "datetime")) == (("start",), ("datetime",))
    assert split_loc(Config, ("spark", "conf", "a.b", "int")) == (("spark", "conf", "a.b"), ("int",))
    assert split_loc(Config, ("routes", 0, "destinations", 1, "level")) == (("routes", 0, "destinations", 1, "level"),
                                                                             ())
    assert model_at(Config, ("routes", 0)) is Route
    assert model_at(Config, ("routes", 0, "destinations", 2)) is Destination
    assert model_at(Config, ("destination_cluster",)).__name__ == "Cluster"  # Cluster | None
    assert model_at(Config, ("cluster", "config")) is None
    assert model_at(Config, ("start",)) is None


# --------------------------------------------------------------------------------------- cross-field checks

def test_cross_field_problems_of_one_model_are_a_line_each():
    raw = make(guarantee="exactly-once", lanes="shared", commit_interval_ms=40_000)
    got = lines(raw)
    assert len(got) == 2
    assert got[0].startswith("guarantee exactly-once needs lanes: isolated")
    assert got[1].startswith("guarantee exactly-once: commit_interval_ms (40000) must be at most half")


# ----------------------------------------------------------------------------------------- cluster.config

def test_cluster_config_reports_every_property_problem_at_its_key(tmp_path):
    raw = make(cluster={"bootstrap_servers": "k", "config": {
        "security.protocol": "SASL_SSL",
        "sasl.password": SECRET,                                   # inline secret
        "linger.ms": 5,                                            # transcoder's own
        "socket.timeout.ms": [1, 2],                               # not a scalar
        "ssl.key.password": "${env:TC_PROBLEMS_UNSET}",            # reference to nothing
        "ssl.keystore.password": f"${{file:{tmp_path / 'none'}}}",  # file that does not exist
        "client.id": "fine",
    }})
    got = problems(raw)
    assert [p.path for p in got] == ["cluster.config.sasl.password", "cluster.config.linger.ms",
                                     "cluster.config.socket.timeout.ms", "cluster.config.ssl.key.password",
                                     "cluster.config.ssl.keystore.password"]
    assert [p.text for p in got] == [
        "a secret must not be inline: use ${env:VAR}, ${file:/path} or ${file:/path:key}",
        "set by transcoder itself; remove it from the config",
        "a client property's value is a string, a number or true/false, not a list",
        "environment variable TC_PROBLEMS_UNSET is not set",
        f"cannot read secret file {tmp_path / 'none'}: No such file or directory",
    ]


def test_no_secret_value_is_echoed_in_any_problem_nor_in_pydantic_s_own_error(tmp_path):
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET)
    raw = make(cluster={"bootstrap_servers": "k", "config": {
        "sasl.password": SECRET, "sasl.jaas.config": {"password": SECRET},
        "ssl.key.password": f"${{file:{secret_file}}}", "linger.ms": SECRET, "x": [SECRET]}},
        group_id="", start=SECRET)
    with pytest.raises(ConfigProblems) as info:
        parse(raw, source="t.yaml", environ={})
    assert [p.path for p in info.value.problems] == [
        "cluster.config.sasl.password", "cluster.config.sasl.jaas.config", "cluster.config.linger.ms",
        "cluster.config.x", "group_id", "start"]
    for text in (str(info.value), repr(info.value.problems)):
        assert SECRET not in text
    # pydantic's own error (which quotes inputs) is not chained into a traceback
    assert info.value.__cause__ is None and info.value.__suppress_context__
    try:
        Config.model_validate(raw, context={"environ": {}})
    except ValidationError as exc:
        cluster_errors = [e for e in exc.errors() if e["loc"][:2] == ("cluster", "config")]
        assert cluster_errors and all(SECRET not in repr(e["input"]) for e in cluster_errors)


def test_a_destination_cluster_is_checked_as_the_source_cluster_is():
    raw = make(destination_cluster={"bootstrap_servers": "k", "config": {"sasl.password": SECRET, "group.id": "g"}})
    assert [p.path for p in problems(raw)] == ["destination_cluster.config.sasl.password",
                                               "destination_cluster.config.group.id"]


# ----------------------------------------------------------------------------------------------- -X

def test_x_properties_report_every_problem_and_no_secret(monkeypatch):
    monkeypatch.delenv("TC_PROBLEMS_UNSET", raising=False)
    with pytest.raises(ConfigProblems) as info:
        properties(("client.id=a", f"sasl.password={SECRET}", "novalue", "ssl.key.password=${env:TC_PROBLEMS_UNSET}"))
    assert str(info.value) == (
        "-X: 3 problems:\n"
        "  expected key=value, got 'novalue'\n"
        "  sasl.password: a secret must not be typed on the command line: use ${env:VAR} or ${file:/path}\n"
        "  ssl.key.password: environment variable TC_PROBLEMS_UNSET is not set")
    assert info.value.exit_code == 2


def test_an_x_property_without_equals_sign_is_not_echoed_when_it_may_be_a_secret():
    with pytest.raises(ConfigProblems) as info:
        properties((f"sasl.password:{SECRET}",))
    assert str(info.value) == "-X: expected key=value, got sasl.password and more (not shown: it may be a secret)"


def test_x_properties_resolve_references_to_plain_values(monkeypatch):
    monkeypatch.setenv("TC_PROBLEMS_PW", "from-env")
    assert properties(("sasl.password=${env:TC_PROBLEMS_PW}", "a=1")) == {"sasl.password": "from-env", "a": "1"}


# ---------------------------------------------------------------------------------------------- render

def test_one_problem_is_one_line_and_several_a_count_then_a_line_each():
    one = [Problem("routes.0.source", "bad")]
    assert render("t.yaml", one) == "t.yaml: routes.0.source: bad"
    two = [Problem("", "whole config"), Problem("routes.0.source", "bad", where="line 7")]
    assert render("t.yaml", two) == "t.yaml: 2 problems:\n  whole config\n  line 7: routes.0.source: bad"
