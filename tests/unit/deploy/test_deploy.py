"""The shipped deployment files agree with the code: the example config validates, the image runs the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import promql_parser
import pytest
import yaml

from tests.support.promql import metric_names
from transcoder import config

ROOT = Path(__file__).resolve().parents[3]


def test_k8s_example_config_is_valid(tmp_path):
    docs = list(yaml.safe_load_all((ROOT / "deploy/k8s/transcoder.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    secret = tmp_path / "sasl.password"
    secret.write_text("s3cret\n")
    text = cm["data"]["config.yaml"].replace("/var/run/secrets/kafka/sasl.password", str(secret))
    conf = config.parse(yaml.safe_load(text), environ={})
    assert conf.cluster.librdkafka()["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(conf)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == conf.metrics.port
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/var/run/secrets/kafka" in mounts and "/etc/transcoder" in mounts
    # SIGTERM drains for shutdown_timeout_s: the grace period must be longer.
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > conf.shutdown_timeout_s


def test_dockerfile_installs_pinned_wheels_and_runs_as_non_root():
    text = (ROOT / "Dockerfile").read_text()
    assert "-c constraints.txt" in text
    assert "USER 10001" in text
    assert 'ENTRYPOINT ["transcoder"]' in text
    assert '"/etc/transcoder/config.yaml"' in text
    for path in ("pyproject.toml", "constraints.txt", "README.md", "transcoder"):
        assert (ROOT / path).exists()


# The monitoring files are PromQL checked by a parser (promtool does not build from the Go module proxy).
ALERTS = ROOT / "deploy/monitoring/prometheus-alerts.yaml"
DASHBOARD = ROOT / "deploy/monitoring/grafana-dashboard.json"
# Rules that fire on the first evaluation, so they carry no `for`: a dead-lettered record is already a failure.
FIRES_AT_ONCE = {"TranscoderDeadLetterNotEmpty", "TranscoderMigrationMismatch"}


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def _panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # rows hold their panels when collapsed


def _dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expr) of every target, with Grafana's variables replaced by values Prometheus would see."""
    dashboard = json.loads(DASHBOARD.read_text())
    values = {"__rate_interval": "5m", "__interval": "1m", "__range": "6h"}
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") in ("interval", "custom"):
            values[var["name"]] = str(var.get("query", "")).split(",")[0].strip() or "5m"
        else:
            values[var["name"]] = f"some-{var['name']}"  # a label value, as in {lane=~"$lane"}
    pattern = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")

    def substitute(m: re.Match) -> str:
        name = next(g for g in m.groups() if g)
        assert name in values, f"unknown Grafana variable {m.group(0)}"
        return values[name]

    return [(panel["title"], pattern.sub(substitute, target["expr"]))
            for panel in _panels(dashboard["panels"]) for target in panel.get("targets", [])]


def test_promql_parser_rejects_broken_expressions():
    for broken in ("rate(transcoder_x_total[5m]", "sum by (lane) (transcoder_x_total", "rate(transcoder_x_total)",
                   "transcoder_x{lane=}", "transcoder_x_total[5m] > > 0"):
        with pytest.raises(ValueError):
            promql_parser.parse(broken)
    with pytest.raises(ValueError):
        promql_parser.parse_duration("15 minutes")


def test_alert_rules_are_complete_and_parse():
    rules = _rules()
    assert rules
    names = [r.get("alert") for r in rules]
    assert all(names) and len(set(names)) == len(names), names
    for rule in rules:
        name = rule["alert"]
        assert isinstance(rule.get("expr"), str) and rule["expr"].strip(), name
        try:
            expr = promql_parser.parse(rule["expr"])
        except ValueError as exc:
            pytest.fail(f"{name}: {exc}: {rule['expr']}")
        metrics = metric_names(expr)
        assert metrics and all(m and m.startswith("transcoder_") for m in metrics), (name, metrics)
        if name in FIRES_AT_ONCE:
            assert "for" not in rule, f"{name} has a `for`: take it out of FIRES_AT_ONCE"
        else:
            assert "for" in rule, name
            assert promql_parser.parse_duration(str(rule["for"])).total_seconds() > 0, name
        assert rule.get("labels", {}).get("severity") in {"info", "warning", "critical"}, name
        assert rule.get("annotations", {}).get("summary"), name


def test_dashboard_queries_parse():
    exprs = _dashboard_exprs()
    assert exprs
    for title, text in exprs:
        try:
            expr = promql_parser.parse(text)
        except ValueError as exc:
            pytest.fail(f"panel {title!r}: {exc}: {text}")
        metrics = metric_names(expr)
        assert metrics and all(m and m.startswith("transcoder_") for m in metrics), (title, metrics)


def test_dashboard_panels_have_unique_ids_and_do_not_overlap():
    panels = list(_panels(json.loads(DASHBOARD.read_text())["panels"]))
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids), ids
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = p["title"]
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]


def test_migration_monitoring_rows_and_alert():
    dashboard = json.loads(DASHBOARD.read_text())
    rows = {p["title"]: p for p in dashboard["panels"] if p["type"] == "row"}
    assert {"Migration", "In-place rollout"} <= set(rows)

    def metrics_below(row: str) -> set[str]:
        """The metrics of the panels from `row` to the next row (an open row holds none itself)."""
        panels = dashboard["panels"]
        start = panels.index(rows[row]) + 1
        below = list(rows[row].get("panels", []))
        for p in panels[start:]:
            if p["type"] == "row":
                break
            below.append(p)
        return {m for p in below for t in p.get("targets", []) for m in metric_names(promql_parser.parse(t["expr"]))}

    assert metrics_below("Migration") == {"transcoder_migration_verified_offset",
                                          "transcoder_migration_mismatches_total", "transcoder_migration_groups"}
    assert metrics_below("In-place rollout") == {"transcoder_stored_codec_ratio"}
    rule = next(r for r in _rules() if r["alert"] == "TranscoderMigrationMismatch")
    assert "increase(transcoder_migration_mismatches_total[10m])" in rule["expr"].replace(" ", "")
    assert rule["labels"]["severity"] == "critical"
    assert "transcoder migrate verify" in rule["annotations"]["description"]
    assert "cutover is refused" in rule["annotations"]["description"]
