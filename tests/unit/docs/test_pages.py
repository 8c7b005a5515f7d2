"""What the hand-written pages say about the code matches the code: the metric labels docs/metrics.md lists, the
commands the metrics reference says export each migration metric, and the `/healthz` threshold. No broker."""

from __future__ import annotations

import re
from pathlib import Path

from transcoder.metrics import reference
from transcoder.metrics.status import stuck_after

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


def test_the_metrics_page_lists_every_label_the_registry_exports():
    text = (DOCS / "metrics.md").read_text()
    m = re.search(r"All `transcoder_\*`, in base units; labels (.*?); never a key", text, re.DOTALL)
    assert m is not None, "docs/metrics.md: the sentence listing the labels is gone"
    listed = re.findall(r"`([a-z_]+)`", m.group(1))
    exported = {label for f in reference.families(reference.example_metrics()) for label in f.labels}
    assert sorted(listed) == sorted(exported)


def test_every_migration_metric_says_which_commands_export_it():
    assert set(reference.MIGRATION_EXPORTED_BY) == reference.migration_family_names()
    page = (DOCS / "reference" / "metrics.md").read_text()
    assert "`transcoder run` exports them beside" not in page


def test_the_healthz_threshold_on_the_metrics_page_is_the_codes():
    text = (DOCS / "metrics.md").read_text()
    assert "`max(60 s, 2 × shutdown_timeout_s, 10 × commit_interval_ms)`: 60 s with the defaults" in text
    assert stuck_after(30.0, 1000) == 60.0  # the defaults (docs/reference/configuration.md)
    assert stuck_after(40.0, 1000) == 80.0 and stuck_after(30.0, 10_000) == 100.0
