"""The metric names a PromQL expression reads, as Prometheus parses it (promql-parser): the monitoring checks of
tests/unit/deploy and tests/unit/metrics share it."""

from __future__ import annotations

import promql_parser


def metric_names(expr: promql_parser.Expr) -> list[str | None]:
    """Each vector selector's metric name, in order (None: a selector without one)."""
    names: list[str | None] = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            names.append(node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), None))

    promql_parser.walk(expr, pre_visit=visit)
    return names
