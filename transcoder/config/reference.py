"""The configuration reference: Markdown rendered from the config model's own fields (their types, defaults,
constraints and descriptions), published as docs/reference/configuration.md.

Regenerate the page with `python -m transcoder.config.reference > docs/reference/configuration.md`.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from transcoder.codecs.names import LEVELS
from transcoder.config.loading import ENV_PREFIX
from transcoder.config.model import Batch, Candidate, Config, Destination

PAGE = "docs/reference/configuration.md"
REGENERATE = f"python -m transcoder.config.reference > {PAGE}"


def _codec_levels() -> str:
    ranges = ", ".join(f"{codec} {bounds[0]} to {bounds[1]}" for codec, bounds in LEVELS.items() if bounds)
    without = " and ".join(codec for codec, bounds in LEVELS.items() if bounds is None)
    return f"by codec: {ranges} ({without} take no level)"


#: Allowed values a model checks in code (a validator, `problems`) rather than in its field constraints, which
#: the JSON schema cannot show; each replaces what the schema says of that field.
CHECKED_IN_CODE: dict[tuple[type[BaseModel], str], str] = {
    (Destination, "level"): _codec_levels(),
    (Candidate, "level"): _codec_levels(),
    (Batch, "max_bytes"): f"1 to {Batch.MAX_BYTES}",
}


@dataclass(frozen=True)
class Section:
    """A model of the config and where its keys sit in a config file: `path` is the first path that reaches it
    ("" for the top level), `also` the others (a model reached twice is listed once)."""

    model: type[BaseModel]
    path: str
    also: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return f"`{self.path}`" if self.path else "Top level"


def _key(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _nested(annotation: Any, suffix: str = "") -> Iterator[tuple[type[BaseModel], str]]:
    """The models inside a field's type, each with what follows the field's name in a key: `[]` for a list item,
    `.<key>` for a mapping's value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, suffix
        return
    args = get_args(annotation)
    if get_origin(annotation) is list:
        suffix += "[]"
    elif get_origin(annotation) is dict:
        suffix, args = suffix + ".<key>", args[1:]
    for arg in args:
        yield from _nested(arg, suffix)


def sections(root: type[BaseModel] = Config) -> list[Section]:
    """Every model reachable from `root`, depth first in field order, as a config file nests them."""
    found: dict[type[BaseModel], Section] = {}

    def visit(model: type[BaseModel], path: str) -> None:
        if model in found:
            found[model] = replace(found[model], also=(*found[model].also, path))
            return
        found[model] = Section(model, path)
        for name, field in model.model_fields.items():
            for nested, suffix in _nested(field.annotation):
                visit(nested, _key(path, field.alias or name) + suffix)

    visit(root, "")
    return list(found.values())


def _either(words: list[str]) -> str:
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _type(schema: dict[str, Any]) -> str:
    """A field's type, in words, from its JSON schema."""
    if "anyOf" in schema:
        return _either([_type(s) for s in schema["anyOf"]])
    if "$ref" in schema:
        return "mapping"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema['items'])}"
    if kind == "object":
        return f"mapping of string to {_type(schema.get('additionalProperties', {}))}"
    if schema.get("format") == "date-time":
        return "date-time"
    if schema.get("format") == "password":
        return "secret"
    return str(kind)


def _bounds(schema: dict[str, Any]) -> str | None:
    """A numeric range in words: `0 to 65535`, `at least 50`, `more than 0, at most 1`."""
    if "minimum" in schema and "maximum" in schema:
        return f"{json.dumps(schema['minimum'])} to {json.dumps(schema['maximum'])}"
    words = [f"{word} {json.dumps(schema[key])}" for key, word in (
        ("minimum", "at least"), ("exclusiveMinimum", "more than"),
        ("maximum", "at most"), ("exclusiveMaximum", "less than")) if key in schema]
    return ", ".join(words) or None


def _counted(low: int | None, high: int | None, noun: str) -> str | None:
    """A length range in words: `1 to 200 characters`, `at least 1 entry`."""
    if low is None and high is None:
        return None
    plural = f"{noun}s" if noun != "entry" else "entries"
    if low is not None and high is not None:
        return f"{low} to {high} {plural}"
    if low is not None:
        return f"at least {low} {noun if low == 1 else plural}"
    return f"at most {high} {noun if high == 1 else plural}"


def _allowed_one(schema: dict[str, Any]) -> str:
    words: list[str | None] = []
    if "enum" in schema or "const" in schema:
        words.append(", ".join(f"`{v}`" for v in schema.get("enum", [schema.get("const")])))
    if schema.get("format") == "date-time":
        words.append("an ISO 8601 date-time")
    words += [_bounds(schema), _counted(schema.get("minLength"), schema.get("maxLength"), "character"),
              _counted(schema.get("minItems"), schema.get("maxItems"), "entry")]
    return ", ".join(w for w in words if w)


def _allowed(schema: dict[str, Any]) -> str:
    """The values a field's JSON schema allows beyond its type: Literal choices, bounds, lengths, formats (each
    alternative of a union on its own)."""
    return "; or ".join(w for w in map(_allowed_one, schema.get("anyOf", [schema])) if w)


def _value(value: Any) -> str:
    """A default as it would be written in YAML."""
    return f"`{value if isinstance(value, str) else json.dumps(value)}`"


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "the defaults of its keys"
    return _value(value)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _paragraphs(doc: str | None) -> list[str]:
    if not doc:
        return []
    return [" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n")]


def _rows(section: Section, where: dict[type[BaseModel], Section]) -> Iterator[str]:
    model = section.model
    properties = model.model_json_schema()["properties"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        schema = properties[key]
        kind = _type(schema)
        for nested, _ in _nested(field.annotation):
            kind += f", see {where[nested].title}"
        allowed = CHECKED_IN_CODE.get((model, name)) or _allowed(schema)
        cells = [f"`{_key(section.path, key)}`", kind, _default(field), allowed, field.description or ""]
        yield "| " + " | ".join(_cell(c) for c in cells) + " |"


def render(root: type[BaseModel] = Config) -> str:
    """The configuration reference page, in Markdown."""
    found = sections(root)
    where = {s.model: s for s in found}
    lines = [
        "# Configuration reference",
        "",
        f"<!-- Generated by transcoder.config.reference from the config model; regenerate: {REGENERATE} -->",
        "",
        "This page is generated from the config model (`transcoder/config/model.py`, the `spark` section in "
        "`transcoder/config/spark.py`): each key's type, default, allowed values and description come from its "
        "field. To change a description, edit the field's docstring, "
        "then regenerate the page from the repository's root:",
        "",
        "<!-- not run: rewrites this page in a checkout -->",
        "```bash",
        REGENERATE,
        "```",
        "",
        "`tests/unit/config/test_reference.py` fails while this page differs from what the generator writes.",
        "",
        "A config file is YAML. Keys are named here by their path in the file, `[]` standing for any entry of a "
        "list: `routes[].destinations[].codec` is the `codec` of an entry of `destinations` in an entry of "
        "`routes`. Unknown keys are errors. Any key can be overridden from the environment, its path in upper "
        f"case joined by `__` after `{ENV_PREFIX}`, list entries by index: "
        f"`{ENV_PREFIX}ROUTES__0__DESTINATIONS__0__LEVEL=9`.",
        "",
        "A key given twice in one mapping, at any depth, is an error naming both lines (`config.yaml: line 7: key "
        "'codec' given twice (first at line 5)`), where YAML itself would keep the last one silently. YAML's merge "
        "key works: `<<: *defaults` merges a mapping, and a key written beside it overrides the merged one.",
        "",
        "Reserved topics are neither sources nor destinations of a route: Kafka's internal topics (any name "
        "starting with `__`) and the config's own, `errors.dlq_topic` and, with a `migration` section, "
        "`migration.offset_map_topic` and `migration.state_topic` (by default `<group_id>.offset-map` and "
        "`<group_id>.migrations`). Every command that reads a config refuses one before it connects, naming the "
        "line and the topic's role, e.g. `config.yaml: line 10: routes.0.destinations.1.topic: destination "
        "tour.offset-map is this config's offset-map topic (...): no route may read or write it`. A "
        "`source_pattern` passes over them (see `routes[].source_pattern`).",
    ]
    for section in found:
        lines += ["", f"## {section.title}", ""]
        for paragraph in _paragraphs(section.model.__doc__):
            lines += [paragraph, ""]
        if section.also:
            lines += [f"The same keys under {', '.join(f'`{p}`' for p in section.also)}.", ""]
        lines += ["| Key | Type | Default | Allowed values | Description |", "| --- | --- | --- | --- | --- |"]
        lines += _rows(section, where)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
