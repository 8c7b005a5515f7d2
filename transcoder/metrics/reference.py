"""The metrics reference page (docs/reference/metrics.md), generated from the registry and deploy/monitoring/.

`python -m transcoder.metrics.reference > docs/reference/metrics.md` writes it. The registry is built as the
service builds it (Metrics, its CPU source, and the migration metrics on the same registry, as with continuous
verification on), and one example of every series is recorded through the registry's own methods: a labelled
family shows its labels, and the series it exposes, only once it has a series.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from transcoder.kafka.retries import KafkaErrors
from transcoder.kafka.statistics import Window
from transcoder.metrics.registry import Metrics, MigrationMetrics, SettingScore

#: deploy/monitoring/ of the checkout this module is in (the page is generated from a checkout)
MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
ALERTS = "prometheus-alerts.yaml"
DASHBOARD = "grafana-dashboard.json"
REGENERATE = "python -m transcoder.metrics.reference > docs/reference/metrics.md"
RUN_VERIFYING = "`transcoder run` with `migration.verify_interval_s` above 0 (beside the copy metrics)"
VERIFY_FOLLOW = "`transcoder migrate verify --follow --metrics-port P`"
WATCH_FOLLOW = "`transcoder migrate watch --follow --metrics-port P`"
#: which commands export each migration metric (service/verifying.py, cli/migrate.py's verify, cli/migrate_watch.py)
MIGRATION_EXPORTED_BY: dict[str, tuple[str, ...]] = {
    "transcoder_stored_codec_ratio": (WATCH_FOLLOW,),
    "transcoder_migration_verified_offset": (RUN_VERIFYING, VERIFY_FOLLOW),
    "transcoder_migration_mismatches": (RUN_VERIFYING, VERIFY_FOLLOW),
    "transcoder_migration_groups": (VERIFY_FOLLOW,),
    "transcoder_migration_predicted_ratio": (VERIFY_FOLLOW,),
    "transcoder_migration_realized_ratio": (VERIFY_FOLLOW,),
    "transcoder_migration_predicted_bytes_per_record": (VERIFY_FOLLOW,),
    "transcoder_migration_realized_bytes_per_record": (VERIFY_FOLLOW,),
}


@dataclass(frozen=True)
class Family:
    """One metric family as a scrape of the registry shows it."""

    name: str  # as collected: a counter without its _total
    type: str  # counter, gauge or histogram
    help: str
    labels: tuple[str, ...]  # le (a histogram bucket's bound) left out
    series: tuple[str, ...]  # every series name it exposes
    buckets: tuple[str, ...]  # a histogram's bucket bounds (le), +Inf last; () for the others

    @property
    def exposed_name(self) -> str:
        """The name the exposition's TYPE line gives it: a counter's ends in _total."""
        return f"{self.name}_total" if self.type == "counter" else self.name


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    wait: str | None  # the rule's `for`; None: it fires at its first evaluation
    labels: dict[str, str]
    summary: str
    description: str


@dataclass(frozen=True)
class Panel:
    title: str
    row: str | None  # the dashboard row it is under; None: above the first row
    exprs: tuple[str, ...]


def example_metrics() -> Metrics:
    """A registry as the service builds it, with one example of every series recorded (values are arbitrary)."""
    metrics = Metrics(kafka_errors=KafkaErrors())  # its own tally: the process's counts nothing here
    metrics.cpu_source(lambda: {("orders", "consume"): 1.5}, lambda: {"orders": 1000})
    migration = MigrationMetrics(metrics.registry)  # as the service does with migration.verify_interval_s > 0
    lane = metrics.lane("orders")
    lane.records(1000, 250_000)
    lane.acked("orders.zstd", "zstd", 1000)
    lane.produced("orders.zstd", "zstd", Window.from_values([40_000.0, 60_000.0]),
                  Window.from_values([400.0, 600.0]), 250_000)
    lane.latency("orders.zstd", 0.2)
    lane.backfill("orders.zstd")
    lane.lag("orders", 0, 10, 0.5)
    lane.running(True)
    lane.error("MSG_SIZE_TOO_LARGE")
    lane.dead_lettered()
    lane.source_records_lost("orders", 0, 5)
    lane.backpressure()
    metrics.kafka_errors.count("NOT_ENOUGH_REPLICAS", topic="orders.zstd", broker=3, partitions=[0])
    # the broker figures, as metrics.broker_figures sets them
    metrics.disk_bytes.labels(topic="orders", role="source").set(4e9)
    metrics.disk_ratio.labels(lane="orders", destination="orders.zstd", codec="zstd").set(4.0)
    metrics.recompression.labels(lane="orders", destination="orders.zstd", reason="config").set(0)
    metrics.candidate_scored("orders.zstd", SettingScore("zstd", None, 4.0, 1.0, 0.4),
                             [SettingScore("zstd", 9, 4.4, 2.0, 0.4)], 1000)
    metrics.candidate_error("orders.zstd")
    metrics.candidate_cpu_spent(0.1)
    migration.stored_mix("orders", {"zstd": 1.0})
    migration.verified("orders.zstd", {0: 1000})
    migration.group_stages("orders.zstd", {"source": 1})
    migration.payoff("orders.zstd", predicted_ratio=8.4, realized_ratio=8.3, predicted_bytes_per_record=25.0,
                     realized_bytes_per_record=25.3)
    return metrics


def families(metrics: Metrics) -> list[Family]:
    """Every family of the registry, in the order it is exposed."""
    out = []
    for fam in metrics.registry.collect():
        labels: dict[str, None] = {}
        series: dict[str, None] = {}
        buckets: dict[str, None] = {}
        for sample in fam.samples:
            series[sample.name] = None
            labels.update((k, None) for k in sample.labels if k != "le")
            if "le" in sample.labels:
                buckets[sample.labels["le"]] = None
        out.append(Family(fam.name, fam.type, fam.documentation, tuple(labels), tuple(series), tuple(buckets)))
    return out


def migration_family_names() -> set[str]:
    """Names of the families MigrationMetrics declares (on a registry of their own)."""
    return {fam.name for fam in MigrationMetrics().registry.collect()}


def alert_rules(text: str) -> list[AlertRule]:
    """The rules of a Prometheus rule file (alerting rules only)."""
    rules = []
    for group in yaml.safe_load(text)["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            notes = rule.get("annotations", {})
            rules.append(AlertRule(rule["alert"], rule["expr"].strip(), rule.get("for"),
                                   {str(k): str(v) for k, v in rule.get("labels", {}).items()},
                                   notes.get("summary", ""), notes.get("description", "")))
    return rules


def dashboard_panels(doc: Mapping[str, Any]) -> list[Panel]:
    """The panels of a Grafana dashboard with their queries, each under the row it sits in."""
    panels: list[Panel] = []
    row: str | None = None
    for panel in doc.get("panels", []):
        if panel.get("type") == "row":
            row = panel.get("title", "")
            inside = panel.get("panels", [])  # a collapsed row holds its panels
        else:
            inside = [panel]
        panels += [Panel(p.get("title", ""), row, tuple(t["expr"] for t in p.get("targets", []) if "expr" in t))
                   for p in inside]
    return panels


def series_in(expr: str, known: Iterable[str]) -> list[str]:
    """The names of `known` an expression names, in order of first use."""
    names = set(known)
    return [t for t in dict.fromkeys(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr)) if t in names]


def _text(s: str) -> str:
    """Free text as Markdown: code spans kept; outside them, what would start emphasis or HTML is escaped."""
    parts = s.split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        escaped = parts[i].replace("*", r"\*").replace("<", "&lt;")
        parts[i] = re.sub(r"(?<!\w)_+", lambda m: "\\_" * len(m.group()), escaped)
    return "`".join(parts)


def _code(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"


def _family_section(f: Family, alerts: list[str], panels: list[str]) -> list[str]:
    lines = [f"### {f.exposed_name}", "", _text(f.help), "", f"- Type: {f.type}", f"- Labels: {_code(f.labels)}",
             f"- Series: {_code(f.series)}"]
    if f.name in MIGRATION_EXPORTED_BY:
        lines.append(f"- Exported by: {'; '.join(MIGRATION_EXPORTED_BY[f.name])}")
    if f.buckets:
        lines.append(f"- Buckets (`le`): {', '.join(f.buckets)}")
    if alerts:
        lines.append(f"- Alerts: {', '.join(f'[{a}](#{a.lower()})' for a in alerts)}")
    if panels:
        lines.append(f"- Dashboard panels: {', '.join(f'“{_text(t)}”' for t in panels)}")
    return [*lines, ""]


def render(copy: list[Family], migration: list[Family], rules: list[AlertRule], panels: list[Panel],
           dashboard_title: str) -> str:
    """The page: the copy and migration metrics, then the alert rules and the dashboard panels that use them."""
    family_of = {s: f.exposed_name for f in copy + migration for s in f.series}
    alerts_of: dict[str, list[str]] = {}
    panels_of: dict[str, list[str]] = {}
    for rule in rules:
        for name in dict.fromkeys(family_of[s] for s in series_in(rule.expr, family_of)):
            alerts_of.setdefault(name, []).append(rule.name)
    for panel in panels:
        named = (family_of[s] for e in panel.exprs for s in series_in(e, family_of))
        for name in dict.fromkeys(named):
            panels_of.setdefault(name, []).append(panel.title)

    lines = [
        "# Metrics reference",
        "",
        f"<!-- Generated by `{REGENERATE}`: do not edit by hand. -->",
        "",
        "This page is generated from the metric registry (`transcoder/metrics/registry.py`) and the monitoring files "
        "in `deploy/monitoring/`. After changing either, regenerate it from the repository's root:",
        "",
        "```sh",
        REGENERATE,
        "```",
        "",
        "`tests/unit/metrics/test_reference.py` fails while this page differs from what the generator writes.",
        "",
        "A running instance serves these metrics on `/metrics` (`metrics.port` in the config) in Prometheus' text "
        "format. Each heading is the metric's name in the exposition; **Series** lists every series name it exposes, "
        "as PromQL names them: a counter's `_total` and, for most, its `_created` (the Unix time the series was "
        "created; left out when the process's environment sets `PROMETHEUS_DISABLE_CREATED_SERIES=True`); a "
        "histogram's `_bucket` (label `le`: the bucket's upper bound), `_count` and `_sum`. A labelled series "
        "appears once its first value is recorded.",
        "",
    ]
    sections = [
        ("Copy metrics", "What `transcoder run` exports, with either engine (service or Spark); the "
         "`transcoder_candidate_*` series appear only with live scoring (`evaluate:` in the config).", copy),
        ("Migration metrics", f"What {VERIFY_FOLLOW} and {WATCH_FOLLOW} export, each on its own registry, and "
         f"{RUN_VERIFYING} in part: each metric's **Exported by** says which. A dashboard panel over a metric only "
         "one of them exports stays empty unless Prometheus scrapes that one.", migration),
    ]
    for title, intro, fams in sections:
        lines += [f"## {title}", "", intro, "", "| Metric | Type | Labels |", "|---|---|---|"]
        lines += [f"| [{f.exposed_name}](#{f.exposed_name}) | {f.type} | {_code(f.labels)} |" for f in fams]
        lines.append("")
        for f in fams:
            lines += _family_section(f, alerts_of.get(f.exposed_name, []), panels_of.get(f.exposed_name, []))

    lines += ["## Alert rules", "",
              f"`deploy/monitoring/{ALERTS}`, for Prometheus' `rule_files`.", ""]
    for rule in rules:
        read = dict.fromkeys(family_of[s] for s in series_in(rule.expr, family_of))
        labels = ", ".join(f"{k} `{v}`" for k, v in rule.labels.items()) or "none"
        fires = (f"fires once its expression has held for `{rule.wait}`" if rule.wait
                 else "fires at the first evaluation its expression holds (no `for`)")
        lines += [f"### {rule.name}", "", f"Labels: {labels}; {fires}.", "",
                  "```promql", rule.expr, "```", "",
                  f"Summary: {_text(rule.summary)}", "", f"Description: {_text(rule.description)}", "",
                  f"Metrics: {', '.join(f'[`{n}`](#{n})' for n in read)}", ""]

    lines += ["## Dashboard panels", "",
              f"`deploy/monitoring/{DASHBOARD}`, the Grafana dashboard “{_text(dashboard_title)}”: its panels and "
              "their queries.", ""]
    row: str | None = None
    for panel in panels:
        if panel.row != row:
            row = panel.row
            lines += ["", f"### Row “{_text(row or '')}”", ""]
        queries = [" ".join(e.split()) for e in panel.exprs]
        if len(queries) == 1:
            lines.append(f"- **{_text(panel.title)}**: `{queries[0]}`")
        else:
            lines += [f"- **{_text(panel.title)}**:", *(f"    - `{q}`" for q in queries)]
    return "\n".join(lines).rstrip("\n") + "\n"


def page(monitoring: Path = MONITORING) -> str:
    """The page, from a fresh registry and the monitoring files in `monitoring`."""
    every = families(example_metrics())
    migration_names = migration_family_names()
    dashboard = json.loads((monitoring / DASHBOARD).read_text())
    return render([f for f in every if f.name not in migration_names], [f for f in every if f.name in migration_names],
                  alert_rules((monitoring / ALERTS).read_text()), dashboard_panels(dashboard),
                  dashboard.get("title", ""))


def main() -> None:
    print(page(), end="")


if __name__ == "__main__":
    main()
