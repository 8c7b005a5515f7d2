"""transcoder.config: defaults, destinations and levels, validation messages, secrets, env overrides, load()."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pydantic
import pytest
import yaml

from transcoder.codecs import CODECS
from transcoder.config import SECRET_PROPERTIES, Destination, load, parse
from transcoder.errors import ConfigError


def make(*, dests: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """A minimal valid raw config: one literal route nginx -> zstd, with top-level keys replaced."""
    raw: dict[str, Any] = {
        "cluster": {"bootstrap_servers": "k1:9092"},
        "routes": [{"source": "nginx", "destinations": dests or [{"codec": "zstd"}]}],
    }
    raw.update(top)
    return raw


def with_secret(key: str, value: Any, *, extra: dict[str, Any] | None = None, where: str = "cluster") -> dict[str, Any]:
    cluster = {"bootstrap_servers": "k1:9092", "config": {**(extra or {}), key: value}}
    return make(**{where: cluster})


def error(raw: Any, environ: dict[str, str] | None = None, source: str = "t.yaml") -> str:
    with pytest.raises(ConfigError) as info:
        parse(raw, source=source, environ=environ or {})
    return str(info.value)


# ---------------------------------------------------------------------------------------------- defaults

def test_minimal_config_gets_documented_defaults():
    c = parse(make(), environ={})
    assert c.group_id == "transcoder"
    assert c.lanes == "isolated"
    assert c.start == "earliest"
    assert c.errors.tolerance == "none"
    assert c.errors.dlq_topic is None
    assert c.metrics.port == 9308
    assert c.metrics.host == "0.0.0.0"
    assert c.destination_cluster is None
    assert c.max_in_flight_bytes == 64 * 1024 * 1024
    assert c.commit_interval_ms == 1000
    assert c.shutdown_timeout_s == 30.0
    assert c.cluster.bootstrap_servers == "k1:9092"
    assert c.cluster.config == {}
    d = c.routes[0].destinations[0]
    assert (d.codec, d.level, d.topic, d.allow_broker_recompression) == ("zstd", None, None, False)
    assert (d.batch.max_bytes, d.batch.max_records, d.batch.linger_ms) == (1_048_576, 100_000, 500)


def test_config_is_frozen():
    c = parse(make(), environ={})
    with pytest.raises(pydantic.ValidationError):
        c.group_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("raw", [None, {}])
def test_empty_config_names_both_required_sections(raw):
    assert error(raw, source="config") == "config: 2 problems:\n  cluster: Field required\n  routes: Field required"


@pytest.mark.parametrize("raw,kind", [([1, 2], "list"), ("text", "str"), (3, "int")])
def test_non_mapping_config_is_refused(raw, kind):
    assert error(raw) == f"t.yaml: the config must be a YAML mapping, not {kind}"


@pytest.mark.parametrize("field,value", [
    ("batch", {"max_bytes": 0}), ("batch", {"max_records": 0}), ("batch", {"max_records": 1_000_001}),
    ("batch", {"linger_ms": -1}), ("batch", {"linger_ms": 900_001}),
])
def test_batch_bounds(field, value):
    msg = error(make(dests=[{"codec": "zstd", field: value}]))
    assert msg.startswith(f"t.yaml: routes.0.destinations.0.batch.{next(iter(value))}: ")


def test_batch_bounds_inclusive():
    c = parse(make(dests=[{"codec": "zstd",
                           "batch": {"max_bytes": 1, "max_records": 1_000_000, "linger_ms": 900_000}}]),
              environ={})
    b = c.routes[0].destinations[0].batch
    assert (b.max_bytes, b.max_records, b.linger_ms) == (1, 1_000_000, 900_000)


# ------------------------------------------------------------------------------------ destinations

@pytest.mark.parametrize("codec,level,template,topic,label", [
    ("zstd", None, None, "nginx.zstd", "zstd"),
    ("zstd", 3, None, "nginx.zstd-3", "zstd-3"),
    ("gzip", 0, None, "nginx.gzip-0", "gzip-0"),  # level 0 is a level, not "no level"
    ("none", None, None, "nginx.none", "none"),
    ("lz4", 12, "{source}-{codec}-l{level}", "nginx-lz4-l12", "lz4-12"),
    ("snappy", None, "copy.{source}", "copy.nginx", "snappy"),
    ("zstd", 7, "{codec}.{source}.{codec}", "zstd.nginx.zstd", "zstd-7"),
    ("gzip", None, "fixed-name", "fixed-name", "gzip"),
])
def test_destination_topic_and_label(codec, level, template, topic, label):
    d = Destination(codec=codec, level=level, topic=template)
    assert d.topic_for("nginx") == topic
    assert d.label == label


def test_destination_through_parse_keeps_template():
    c = parse(make(dests=[{"codec": "zstd", "level": 5, "topic": "z.{level}.{source}"}]), environ={})
    assert c.routes[0].destinations[0].topic_for("web") == "z.5.web"


def test_unknown_template_field_is_an_error():
    assert error(make(dests=[{"codec": "zstd", "topic": "{source}.{topic}"}])) == (
        "t.yaml: routes.0.destinations.0: topic template '{source}.{topic}' may use only "
        "{source}, {codec}, {level}")


def test_positional_template_field_is_an_error():
    assert "may use only {source}, {codec}, {level}" in error(make(dests=[{"codec": "zstd", "topic": "{}.x"}]))


def test_level_in_template_needs_a_level():
    assert error(make(dests=[{"codec": "zstd", "topic": "{source}.{level}"}])) == (
        "t.yaml: routes.0.destinations.0: topic template '{source}.{level}' uses {level} but no level is set")


@pytest.mark.parametrize("template", ["{source", "{source}}", "{source.upper}", "{source!r}"])
def test_malformed_template_is_refused_up_front(template):
    with pytest.raises(ConfigError):
        parse(make(dests=[{"codec": "zstd", "topic": template}]), environ={})


@pytest.mark.parametrize("codec,level", [
    ("gzip", 0), ("gzip", 9), ("lz4", 0), ("lz4", 12), ("zstd", 1), ("zstd", 12),
])
def test_levels_in_range_are_accepted(codec, level):
    assert parse(make(dests=[{"codec": codec, "level": level}]), environ={}).routes[0].destinations[0].level == level


@pytest.mark.parametrize("codec,level,bounds", [
    ("gzip", -1, "0..9"), ("gzip", 10, "0..9"), ("lz4", -1, "0..12"), ("lz4", 13, "0..12"),
    ("zstd", 0, "1..22"), ("zstd", 23, "1..22"), ("zstd", -5, "1..22"),
])
def test_levels_out_of_range_name_path_and_range(codec, level, bounds):
    assert error(make(dests=[{"codec": codec, "level": level}])) == (
        f"t.yaml: routes.0.destinations.0: level {level} is outside {bounds}, the range of {codec} levels")


@pytest.mark.parametrize("codec", ["snappy", "none"])
@pytest.mark.parametrize("level", [0, 1])
def test_codecs_without_levels_refuse_any_level(codec, level):
    assert error(make(dests=[{"codec": codec, "level": level}])) == (
        f"t.yaml: routes.0.destinations.0: codec {codec} has no compression levels; remove `level`")


def test_level_error_path_names_route_and_destination_index():
    raw = make()
    raw["routes"].append({"source": "web", "destinations": [{"codec": "zstd"}, {"codec": "gzip", "level": 11}]})
    assert error(raw).startswith("t.yaml: routes.1.destinations.1: level 11 is outside 0..9")


def test_unknown_codec_is_refused():
    one_of = "Input should be " + ", ".join(f"'{c}'" for c in CODECS[:-1]) + f" or '{CODECS[-1]}'"
    assert error(make(dests=[{"codec": "brotli"}])) == f"t.yaml: routes.0.destinations.0.codec: {one_of}"


# ------------------------------------------------------------------------------------------ routes

@pytest.mark.parametrize("route", [
    {"source": "a", "source_pattern": "a.*", "destinations": [{"codec": "zstd"}]},
    {"destinations": [{"codec": "zstd"}]},
])
def test_exactly_one_of_source_or_pattern(route):
    assert error(make(routes=[route])) == "t.yaml: routes.0: give exactly one of source or source_pattern"


def test_invalid_regex_is_refused():
    msg = error(make(routes=[{"source_pattern": "logs.(", "destinations": [{"codec": "zstd"}]}]))
    assert msg.startswith("t.yaml: routes.0: source_pattern 'logs.(' is not a regex: missing ), "
                          "unterminated subpattern")


def test_valid_pattern_is_kept():
    c = parse(make(routes=[{"source_pattern": r"logs\..*", "destinations": [{"codec": "zstd"}]}]), environ={})
    assert (c.routes[0].source, c.routes[0].source_pattern) == (None, r"logs\..*")


def test_empty_destinations_is_refused():
    assert error(make(routes=[{"source": "a", "destinations": []}])) == (
        "t.yaml: routes.0.destinations: List should have at least 1 item after validation, not 0")


def test_empty_routes_is_refused():
    assert error(make(routes=[])) == "t.yaml: routes: List should have at least 1 item after validation, not 0"


def test_empty_source_is_refused():
    with pytest.raises(ConfigError):
        parse(make(routes=[{"source": "", "destinations": [{"codec": "zstd"}]}]), environ={})


# ------------------------------------------------------------------------------------------ errors

@pytest.mark.parametrize("errors", [{"tolerance": "all"}, {"tolerance": "all", "dlq_topic": ""}])
def test_tolerance_all_needs_dlq(errors):
    assert error(make(errors=errors)) == (
        "t.yaml: errors: tolerance all needs a dlq_topic, or failed records would be dropped")


def test_tolerance_all_with_dlq():
    c = parse(make(errors={"tolerance": "all", "dlq_topic": "dead"}), environ={})
    assert (c.errors.tolerance, c.errors.dlq_topic) == ("all", "dead")


def test_tolerance_is_a_closed_set():
    assert error(make(errors={"tolerance": "some"})) == "t.yaml: errors.tolerance: Input should be 'none' or 'all'"


# ------------------------------------------------------------------------------------ unknown keys

@pytest.mark.parametrize("mutate,loc,meant", [
    (lambda r: r.update(rotues=[]), "rotues", "routes"),
    (lambda r: r["routes"][0].update(sorce="x"), "routes.0.sorce", "source"),
    (lambda r: r["routes"][0]["destinations"][0].update(codex="zstd"), "routes.0.destinations.0.codex", "codec"),
    (lambda r: r["routes"][0]["destinations"][0].update(batch={"max_byte": 1}),
     "routes.0.destinations.0.batch.max_byte", "max_bytes"),
    (lambda r: r["cluster"].update(bootstrap="x"), "cluster.bootstrap", "bootstrap_servers"),
    (lambda r: r.update(errors={"dlq": "x"}), "errors.dlq", "dlq_topic"),
    (lambda r: r.update(metrics={"prot": 1}), "metrics.prot", "port"),
])
def test_unknown_keys_are_errors_with_the_key_meant(mutate, loc, meant):
    raw = make()
    mutate(raw)
    key = loc.rpartition(".")[2]
    assert error(raw) == f"t.yaml: {loc}: unknown key `{key}` (did you mean `{meant}`?)"


def test_misspelt_codec_key_is_one_problem_not_a_missing_and_an_unknown_key():
    raw = make(dests=[{"codex": "zstd"}])
    assert error(raw) == "t.yaml: routes.0.destinations.0.codex: unknown key `codex` (did you mean `codec`?)"


# ------------------------------------------------------------------------------------------- start

@pytest.mark.parametrize("value,expected", [
    ("earliest", "earliest"),
    ("latest", "latest"),
    ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
    ("2026-01-01T10:30:00+02:00", datetime(2026, 1, 1, 8, 30, tzinfo=UTC)),
    (datetime(2026, 3, 1, tzinfo=timezone(timedelta(hours=-5))), datetime(2026, 3, 1, 5, tzinfo=UTC)),
])
def test_start_accepted(value, expected):
    start = parse(make(start=value), environ={}).start
    assert start == expected
    if isinstance(expected, datetime):
        assert start.tzinfo is not None


def test_start_from_yaml_timestamp_with_zone():
    raw = yaml.safe_load("cluster: {bootstrap_servers: k}\nroutes: [{source: a, destinations: [{codec: zstd}]}]\n"
                         "start: 2026-01-01T00:00:00Z\n")
    assert parse(raw, environ={}).start == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("value", ["2026-01-01T00:00:00", datetime(2026, 1, 1), date(2026, 1, 1), "2026-01-01"])
def test_start_without_zone_is_refused(value):
    assert error(make(start=value)) == (
        "t.yaml: start: a start timestamp needs a time zone, e.g. 2026-01-01T00:00:00Z")


def test_start_nonsense_is_refused():
    assert error(make(start="yesterday")) == (  # the union's two reasons, as one problem of one key
        "t.yaml: start: Input should be 'earliest' or 'latest'; or input should be a valid datetime or date, input is "
        "too short")


# ------------------------------------------------------------------------------------- one per line

def test_every_problem_on_a_line_of_its_own_after_the_count_and_the_source():
    raw = make(group_id="", lanes="both", x=1, metrics={"port": 70000}, dests=[{"codec": "brotli"}])
    first, *lines = error(raw, source="prod.yaml").split("\n")
    assert first == "prod.yaml: 5 problems:"
    assert all(line.startswith("  ") for line in lines)
    assert [line.strip().split(": ")[0] for line in lines] == [
        "group_id", "lanes", "routes.0.destinations.0.codec", "metrics.port", "x"]
    assert lines[0] == "  group_id: String should have at least 1 character"
    assert lines[-1].startswith("  x: unknown key `x` (")


def test_a_newline_in_a_key_does_not_make_a_line_of_its_own():
    msg = error({**make(), "rou\ntes": 1})
    assert msg.count("\n") == 0 and "rou\\ntes" in msg


# ------------------------------------------------------------------------------------------ secrets

@pytest.mark.parametrize("key", sorted(SECRET_PROPERTIES))
def test_inline_secret_is_refused(key):
    msg = error(with_secret(key, "hunter2-inline"))
    assert msg == (f"t.yaml: cluster.config.{key}: a secret must not be inline: "
                   "use ${env:VAR}, ${file:/path} or ${file:/path:key}")
    assert "hunter2-inline" not in msg


def test_inline_secret_refused_for_destination_cluster():
    msg = error(with_secret("sasl.password", "hunter2-inline", where="destination_cluster"))
    assert msg.startswith("t.yaml: destination_cluster.config.sasl.password: a secret must not be inline")


def test_inline_numeric_secret_is_refused():
    with pytest.raises(ConfigError):
        parse(with_secret("sasl.password", 123456), environ={})


SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice"}


def test_env_reference_resolves_and_stays_hidden():
    c = parse(with_secret("sasl.password", "${env:TC_UNIT_PW}", extra=SASL), environ={"TC_UNIT_PW": "s3cr3t-pw-value"})
    assert isinstance(c.cluster.config["sasl.password"], pydantic.SecretStr)
    assert c.cluster.librdkafka() == {**SASL, "sasl.password": "s3cr3t-pw-value", "bootstrap.servers": "k1:9092"}
    assert c.cluster.redacted() == {"bootstrap.servers": "k1:9092", **SASL, "sasl.password": "***"}
    assert list(c.cluster.redacted())[0] == "bootstrap.servers"
    for text in (repr(c), str(c), c.model_dump_json(), repr(c.cluster), str(c.cluster.config),
                 json.dumps(c.cluster.redacted())):
        assert "s3cr3t-pw-value" not in text
    assert json.loads(c.model_dump_json())["cluster"]["config"]["sasl.password"] == "**********"


def test_env_reference_inside_text():
    c = parse(with_secret("sasl.jaas.config", 'org.x.PlainLoginModule required username="${env:TC_UNIT_USER}" '
                          'password="${env:TC_UNIT_PW}";'), environ={"TC_UNIT_USER": "bob", "TC_UNIT_PW": "pw"})
    assert c.cluster.librdkafka()["sasl.jaas.config"] == 'org.x.PlainLoginModule required username="bob" password="pw";'


def test_reference_in_non_secret_property_resolves_as_plain_value():
    c = parse(with_secret("ssl.ca.location", "${env:TC_UNIT_CA}"), environ={"TC_UNIT_CA": "/etc/ca.pem"})
    assert c.cluster.config["ssl.ca.location"] == "/etc/ca.pem"
    assert c.cluster.redacted()["ssl.ca.location"] == "/etc/ca.pem"


def test_missing_env_var_names_the_property(monkeypatch):
    monkeypatch.delenv("TC_UNIT_MISSING", raising=False)
    assert error(with_secret("sasl.password", "${env:TC_UNIT_MISSING}")).endswith(
        "cluster.config.sasl.password: environment variable TC_UNIT_MISSING is not set")


def test_missing_env_var_reported_with_source_and_other_problems(monkeypatch):
    monkeypatch.delenv("TC_UNIT_MISSING", raising=False)
    raw = with_secret("sasl.password", "${env:TC_UNIT_MISSING}")
    raw["group_id"] = ""
    msg = error(raw, source="prod.yaml")
    assert msg.startswith("prod.yaml: ")
    assert "group_id" in msg


def test_missing_env_var_in_destination_cluster_names_destination_cluster(monkeypatch):
    monkeypatch.delenv("TC_UNIT_MISSING", raising=False)
    msg = error(with_secret("sasl.password", "${env:TC_UNIT_MISSING}", where="destination_cluster"))
    assert "destination_cluster.config.sasl.password: environment variable TC_UNIT_MISSING" in msg


def test_env_reference_uses_the_environ_mapping(monkeypatch):
    monkeypatch.delenv("TC_UNIT_ONLY_IN_MAPPING", raising=False)
    c = parse(with_secret("sasl.password", "${env:TC_UNIT_ONLY_IN_MAPPING}"),
              environ={"TC_UNIT_ONLY_IN_MAPPING": "from-mapping"})
    assert c.cluster.librdkafka()["sasl.password"] == "from-mapping"


def test_file_reference_reads_whole_file_stripped(tmp_path):
    f = tmp_path / "pw"
    f.write_text("  file-secret \n\n")
    c = parse(with_secret("sasl.password", f"${{file:{f}}}"), environ={})
    assert c.cluster.librdkafka()["sasl.password"] == "file-secret"
    assert "file-secret" not in repr(c)


def test_file_reference_keeps_inner_lines(tmp_path):
    f = tmp_path / "key.pem"
    f.write_text("-----BEGIN KEY-----\nabc\n-----END KEY-----\n")
    c = parse(with_secret("ssl.key.pem", f"${{file:{f}}}"), environ={})
    assert c.cluster.librdkafka()["ssl.key.pem"] == "-----BEGIN KEY-----\nabc\n-----END KEY-----"


def test_file_reference_with_key_reads_properties(tmp_path):
    f = tmp_path / "creds.properties"
    f.write_text("# comment\nuser=alice\n password = p=w=d \nother=x\n")
    c = parse(with_secret("sasl.password", f"${{file:{f}:password}}"), environ={})
    assert c.cluster.librdkafka()["sasl.password"] == "p=w=d"


def test_missing_secret_file(tmp_path):
    missing = tmp_path / "nope"
    assert error(with_secret("sasl.password", f"${{file:{missing}}}")) == (
        f"t.yaml: cluster.config.sasl.password: cannot read secret file {missing}: No such file or directory")


def test_missing_key_in_secret_file(tmp_path):
    f = tmp_path / "creds.properties"
    f.write_text("user=alice\n")
    assert error(with_secret("sasl.password", f"${{file:{f}:password}}")) == (
        f"t.yaml: cluster.config.sasl.password: no key 'password' in {f}")


@pytest.mark.parametrize("key", ["enable.idempotence", "compression.type", "group.id", "bootstrap.servers",
                                 "linger.ms", "enable.auto.commit", "metadata.broker.list"])
def test_owned_properties_are_refused(key):
    assert error(with_secret(key, "x")) == (
        f"t.yaml: cluster.config.{key}: set by transcoder itself; remove it from the config")


def test_owned_property_refused_in_destination_cluster():
    assert error(with_secret("compression.type", "zstd", where="destination_cluster")).startswith(
        "t.yaml: destination_cluster.config.compression.type: set by transcoder itself")


def test_plain_properties_keep_their_types():
    c = parse(with_secret("socket.keepalive.enable", True, extra={"retries": 5, "security.protocol": "SSL"}),
              environ={})
    assert c.cluster.librdkafka() == {"retries": 5, "security.protocol": "SSL", "socket.keepalive.enable": True,
                                      "bootstrap.servers": "k1:9092"}


def test_target_cluster():
    assert parse(make(), environ={}).target_cluster.bootstrap_servers == "k1:9092"
    c = parse(make(destination_cluster={"bootstrap_servers": "d1:9092"}), environ={})
    assert c.target_cluster.bootstrap_servers == "d1:9092"
    assert c.cluster.bootstrap_servers == "k1:9092"


# ------------------------------------------------------------------------------------ env overrides

def test_env_overrides_set_values_parsed_as_yaml():
    c = parse(make(), environ={
        "TRANSCODER__GROUP_ID": "g2",
        "TRANSCODER__CLUSTER__BOOTSTRAP_SERVERS": "a:1,b:2",
        "TRANSCODER__ROUTES__0__DESTINATIONS__0__LEVEL": "3",
        "TRANSCODER__ROUTES__0__DESTINATIONS__0__ALLOW_BROKER_RECOMPRESSION": "true",
        "TRANSCODER__METRICS__PORT": "0",
        "TRANSCODER__LANES": "shared",
        "GROUP_ID": "ignored", "transcoder__group_id": "ignored-too", "TRANSCODER__": "ignored-empty-path",
    })
    assert c.group_id == "g2"
    assert c.cluster.bootstrap_servers == "a:1,b:2"
    d = c.routes[0].destinations[0]
    assert (d.level, d.allow_broker_recompression, d.label) == (3, True, "zstd-3")
    assert c.metrics.port == 0
    assert c.lanes == "shared"


def test_env_override_creates_missing_sections():
    c = parse(make(), environ={"TRANSCODER__ERRORS__TOLERANCE": "all", "TRANSCODER__ERRORS__DLQ_TOPIC": "dead"})
    assert (c.errors.tolerance, c.errors.dlq_topic) == ("all", "dead")


def test_env_override_value_is_validated():
    assert error(make(), environ={"TRANSCODER__LANES": "both"}) == (
        "t.yaml: lanes: Input should be 'isolated' or 'shared'")


def test_env_override_of_level_is_range_checked():
    assert error(make(), environ={"TRANSCODER__ROUTES__0__DESTINATIONS__0__LEVEL": "30"}).startswith(
        "t.yaml: routes.0.destinations.0: level 30 is outside 1..22")


@pytest.mark.parametrize("name,path", [
    ("TRANSCODER__ROUTES__3__SOURCE", "routes.3.source"),
    ("TRANSCODER__ROUTES__0__DESTINATIONS__5__LEVEL", "routes.0.destinations.5.level"),
    ("TRANSCODER__ROUTES__2", "routes.2"),
])
def test_env_override_of_missing_list_index(name, path):
    assert error(make(), environ={name: "1"}) == f"{name}: no {path} to override"


def test_env_override_below_a_scalar():
    assert error(make(group_id="g"), environ={"TRANSCODER__GROUP_ID__X": "1"}) == (
        "TRANSCODER__GROUP_ID__X: no group_id.x to override")


def test_env_override_with_non_numeric_list_index_is_a_config_error():
    with pytest.raises(ConfigError, match="TRANSCODER__ROUTES__FIRST__SOURCE"):
        parse(make(), environ={"TRANSCODER__ROUTES__FIRST__SOURCE": "x"})


def test_parse_without_environ_reads_os_environ(monkeypatch):
    monkeypatch.setenv("TRANSCODER__GROUP_ID", "from-os")
    assert parse(make()).group_id == "from-os"
    assert parse(make(), environ={}).group_id == "transcoder"


# ---------------------------------------------------------------------------------------------- load

VALID = "cluster:\n  bootstrap_servers: k1:9092\nroutes:\n  - source: nginx\n    destinations:\n      - codec: zstd\n"


def test_load_valid_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(VALID + "group_id: from-file\n")
    c = load(p, environ={"TRANSCODER__LANES": "shared"})
    assert (c.group_id, c.lanes, c.routes[0].source) == ("from-file", "shared", "nginx")


def test_load_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load(p, environ={})
    assert str(info.value) == f"config file {p} does not exist"


def test_load_directory(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ={})
    assert str(info.value) == f"cannot read config file {tmp_path}: Is a directory"


@pytest.mark.parametrize("text,message", [
    ("group_id: x\n  bad: indent\n", "line 2 is not valid YAML: mapping values are not allowed here"),
    ("- a\n- b\n", "the config must be a YAML mapping, not list"),
    (VALID + "rotues: []\n", "rotues: unknown key `rotues` (did you mean `routes`?)"),
])
def test_load_errors_are_prefixed_by_path(tmp_path, text, message):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load(p, environ={})
    assert str(info.value) == f"{p}: {message}"


def test_load_empty_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("")
    with pytest.raises(ConfigError) as info:
        load(p, environ={})
    assert str(info.value) == f"{p}: 2 problems:\n  cluster: Field required\n  routes: Field required"


def test_config_error_is_exit_code_2():
    with pytest.raises(ConfigError) as info:
        parse({}, environ={})
    assert info.value.exit_code == 2
    assert info.value.retriable is False

