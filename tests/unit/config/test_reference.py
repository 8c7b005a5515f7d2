"""transcoder.config.reference: every key of the config model is described, and the published page is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from transcoder.codecs import CODECS
from transcoder.config import Config
from transcoder.config.reference import CHECKED_IN_CODE, PAGE, REGENERATE, render, sections

ROOT = Path(__file__).resolve().parents[3]


def row(key: str) -> list[str]:
    """The cells of the page's row of `key` (its dotted path): type, default, allowed values, description."""
    start = f"| `{key}` | "
    rows = [line for line in render().splitlines() if line.startswith(start)]
    assert len(rows) == 1, f"{len(rows)} rows for {key}"
    return [cell.strip() for cell in rows[0][len(start):].rstrip(" |").split(" | ")]


def test_every_field_of_every_model_has_a_description():
    missing = [f"{s.model.__name__}.{name} (`{s.path + '.' if s.path else ''}{name}`)"
               for s in sections(Config) for name, field in s.model.model_fields.items()
               if not (field.description or "").strip()]
    assert not missing, ("fields without a description (a docstring under the field in transcoder/config/model.py "
                         "or spark.py): " + ", ".join(missing))


def test_every_model_has_a_docstring():
    """A model's docstring introduces its section of the page."""
    missing = [s.model.__name__ for s in sections(Config) if not (s.model.__doc__ or "").strip()]
    assert not missing, f"models without a docstring: {', '.join(missing)}"


def test_every_model_reachable_from_the_root_has_a_section():
    paths = {s.model.__name__: s.path for s in sections(Config)}
    assert paths == {
        "Config": "", "Cluster": "cluster", "Route": "routes[]", "Destination": "routes[].destinations[]",
        "Batch": "routes[].destinations[].batch", "ErrorsConfig": "errors", "MetricsConfig": "metrics",
        "SparkConfig": "spark", "EvaluateConfig": "evaluate", "Candidate": "evaluate.candidates[]",
        "MigrationConfig": "migration",
    }
    assert [s.also for s in sections(Config) if s.also] == [("destination_cluster",)]


def test_the_published_page_is_the_generators_output():
    page = ROOT / PAGE
    assert page.is_file(), f"{PAGE} is missing: generate it with `{REGENERATE}`"
    assert page.read_text() == render(), f"{PAGE} is out of date: regenerate it with `{REGENERATE}`"


def test_checks_made_in_code_name_fields_that_exist():
    for model, name in CHECKED_IN_CODE:
        assert name in model.model_fields, f"{model.__name__} has no field {name}"


def test_a_literal_lists_its_choices_and_its_default():
    kind, default, allowed, description = row("guarantee")
    assert (kind, default, allowed) == ("string", "`at-least-once`", "`at-least-once`, `exactly-once`")
    assert "transactional producer" in description


def test_nested_keys_show_their_path_default_and_bounds():
    assert row("routes[].destinations[].batch.linger_ms")[:3] == ["integer", "`500`", "0 to 900000"]
    assert row("routes[].destinations[].codec")[1:3] == ["required", ", ".join(f"`{c}`" for c in CODECS)]


def test_a_level_lists_each_codecs_levels():
    allowed = row("routes[].destinations[].level")[2]
    assert "gzip 0 to 9" in allowed and "zstd 1 to 22" in allowed
    assert allowed == row("evaluate.candidates[].level")[2]


@pytest.mark.parametrize(("key", "kind", "default"), [
    ("destination_cluster", "mapping or null, see `cluster`", "`null`"),
    ("start", "string or date-time", "`earliest`"),
    ("metrics", "mapping, see `metrics`", "the defaults of its keys"),
    ("cluster.config", "mapping of string to string, integer, number, boolean or secret", "`{}`"),
])
def test_types_and_defaults_in_words(key, kind, default):
    assert row(key)[:2] == [kind, default]
