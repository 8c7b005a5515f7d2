"""The metrics reference page (docs/reference/metrics.md) is the generator's output, names every metric of the
registry with its labels and help, and the alert rules and dashboard panels it lists name only exported series."""

from __future__ import annotations

import difflib
import json
import re
import shutil
from pathlib import Path

import promql_parser
import yaml

from tests.support.promql import metric_names
from transcoder.metrics import reference
from transcoder.metrics.registry import Metrics, MigrationMetrics

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs/reference/metrics.md"
MONITORING = ROOT / "deploy/monitoring"


def test_page_is_the_generators_output():
    written = PAGE.read_text() if PAGE.exists() else ""
    diff = list(difflib.unified_diff(written.splitlines(), reference.page(MONITORING).splitlines(),
                                     "docs/reference/metrics.md", "generated", lineterm="", n=1))
    assert not diff, ("docs/reference/metrics.md is not what the generator writes: regenerate it from the "
                      f"repository's root with `{reference.REGENERATE}`\n" + "\n".join(diff[:60]))


def test_main_prints_the_page(capsys):
    reference.main()
    assert capsys.readouterr().out == reference.page(MONITORING)


def _service_registry() -> Metrics:
    """The registry as the service builds it (its CPU source, the migration metrics beside), nothing recorded."""
    metrics = Metrics()
    metrics.cpu_source(dict, dict)
    MigrationMetrics(metrics.registry)
    return metrics


def test_the_example_has_a_series_of_every_family_the_service_declares():
    declared = {(f.name, f.type, f.documentation) for f in _service_registry().registry.collect()}
    example = list(reference.example_metrics().registry.collect())
    assert {(f.name, f.type, f.documentation) for f in example} == declared
    empty = [f.name for f in example if not f.samples]
    assert not empty, (f"record a series of {empty} in reference.example_metrics: a family's labels are collected "
                       "from its series")


def _sections(page: str) -> dict[str, str]:
    """Heading (###) -> the text under it."""
    parts = re.split(r"^### (.+)$", page, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _line(body: str, start: str) -> str:
    return next((line for line in body.splitlines() if line.startswith(start)), "")


def test_every_metric_is_on_the_page_with_its_labels_series_and_help():
    sections = _sections(PAGE.read_text())
    headings = set()
    for fam in reference.example_metrics().registry.collect():
        assert fam.documentation.strip(), f"{fam.name} has no help text"
        heading = f"{fam.name}_total" if fam.type == "counter" else fam.name
        headings.add(heading)
        assert heading in sections, f"{heading} has no section on the page"
        body = sections[heading].replace("\\", "").replace("&lt;", "<")
        assert fam.documentation in body, heading
        assert f"- Type: {fam.type}\n" in body, heading
        labels = {k for s in fam.samples for k in s.labels} - {"le"}
        assert set(re.findall(r"`(\w+)`", _line(body, "- Labels:"))) == labels, heading
        assert set(re.findall(r"`(\w+)`", _line(body, "- Series:"))) == {s.name for s in fam.samples}, heading
    stale = {h for h in sections if h.startswith("transcoder_")} - headings
    assert not stale, f"the page describes metrics the registry does not declare: {sorted(stale)}"


def _metric_names(expr: str) -> set[str]:
    """The metric names an expression's selectors name, as Prometheus parses it."""
    # Grafana's own range variables, as Prometheus would see them
    names = metric_names(promql_parser.parse(re.sub(r"\$\{?__\w+\}?", "5m", expr)))
    assert None not in names, expr
    return set(names)  # type: ignore[arg-type]


def _queries(monitoring: Path) -> dict[str, str]:
    """Every query of the alert rules and of the dashboard's panels (rows' panels too): where -> expression."""
    queries = {}
    for group in yaml.safe_load((monitoring / "prometheus-alerts.yaml").read_text())["groups"]:
        for rule in group["rules"]:
            queries[f"alert {rule.get('alert') or rule.get('record')}"] = rule["expr"]

    def visit(panels: list[dict]) -> None:
        for panel in panels:
            for i, target in enumerate(panel.get("targets", [])):
                if "expr" in target:
                    queries[f"panel {panel['title']!r} query {i}"] = target["expr"]
            visit(panel.get("panels", []))

    visit(json.loads((monitoring / "grafana-dashboard.json").read_text())["panels"])
    return queries


def _exported_series() -> set[str]:
    return {s.name for fam in reference.example_metrics().registry.collect() for s in fam.samples}


def _not_exported(monitoring: Path) -> dict[str, set[str]]:
    """Where -> the metric names a query names that the registry does not export."""
    exported = _exported_series()
    return {where: missing for where, expr in _queries(monitoring).items()
            if (missing := _metric_names(expr) - exported)}


def test_alerts_and_panels_name_only_exported_series():
    queries = _queries(MONITORING)
    assert any(w.startswith("alert ") for w in queries) and any(w.startswith("panel ") for w in queries)
    assert _not_exported(MONITORING) == {}


def test_a_misspelt_metric_in_an_alert_is_caught(tmp_path):
    alerts = (MONITORING / "prometheus-alerts.yaml").read_text()
    misspelt = alerts.replace("expr: transcoder_lane_running == 0", "expr: transcoder_lane_runing == 0")
    assert misspelt != alerts
    (tmp_path / "prometheus-alerts.yaml").write_text(misspelt)
    shutil.copy(MONITORING / "grafana-dashboard.json", tmp_path)
    assert _not_exported(tmp_path) == {"alert TranscoderLaneDown": {"transcoder_lane_runing"}}


def test_the_page_links_each_query_to_the_series_prometheus_would_read():
    exported = _exported_series()
    for where, expr in _queries(MONITORING).items():
        assert set(reference.series_in(expr, exported)) == _metric_names(expr), where
