"""A config's problems in words, one per line: pydantic's errors as `path: problem` (an unknown key with its
did-you-mean, merged with the required key it was meant as; a union's several errors as one), and the ConfigError
that names them all.

Pure: a ValidationError and the model in, words out. No value is ever quoted from the input (a secret could be one):
only key names, and pydantic's messages, which say what was expected.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from transcoder.config.reserved import Loc
from transcoder.errors import ConfigError

#: An unknown key lists the keys it could have been when there are at most this many (else the reference does).
MAX_LISTED_KEYS = 10


@dataclass(frozen=True)
class Problem:
    """One problem of a config: the dotted path of the key (empty: the whole config), what is wrong, and where it is
    written when that is known (`line 7`, or the TRANSCODER__* variable that set it)."""

    path: str
    text: str
    where: str | None = None

    def __str__(self) -> str:
        head = ": ".join(p for p in (self.where, self.path) if p)
        return f"{head}: {self.text}" if head else self.text


class ConfigProblems(ConfigError):
    """A config refused with every problem found (exit 2, as every ConfigError): one problem on one line; several on
    a line saying how many, then one per line."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(render(source, self.problems))


def render(source: str, problems: Sequence[Problem]) -> str:
    """`source: path: problem` for one problem; `source: N problems:` and `  path: problem` lines for several."""
    if len(problems) == 1:
        return f"{source}: {problems[0]}"
    return f"{source}: {len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems)


def dotted(loc: Loc) -> str:
    """A key's place as a dotted path (routes.0.destinations.1.level), on one line whatever its keys hold."""
    return ".".join(str(p) for p in loc).replace("\n", "\\n")


def did_you_mean(key: str, keys: Iterable[str]) -> str | None:
    """The one of `keys` that `key` most likely misspells (difflib's closest match, case aside), or None."""
    by_lower = {k.lower(): k for k in keys}
    match = difflib.get_close_matches(key.lower(), list(by_lower), n=1)
    if match:
        return by_lower[match[0]]
    # a key cut short or run on (dlq for dlq_topic): the one key it begins, or that begins it
    near = [k for lower, k in by_lower.items() if len(key) >= 3 and (lower.startswith(key.lower())
                                                                      or key.lower().startswith(lower))]
    return near[0] if len(near) == 1 else None


def from_validation(exc: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """Every problem of `exc` (raised validating `model`), in pydantic's order, one each: an unknown key says which
    key it likely misspells (and then a `missing` error of that key is the same mistake, not reported again), and
    the errors of a union's members at one key are one problem."""
    errors = exc.errors(include_url=False)
    missing = {tuple(e["loc"]) for e in errors if e["type"] == "missing"}
    meant: dict[Loc, Loc] = {}  # a missing key -> the unknown key meant as it (reported in its place)
    unknown: dict[Loc, str] = {}
    for e in errors:
        loc: Loc = tuple(e["loc"])
        if e["type"] == "extra_forbidden" and loc:
            keys = model_keys(model_at(model, loc[:-1]))
            match = did_you_mean(str(loc[-1]), keys)
            if match is not None and (*loc[:-1], match) in missing and (*loc[:-1], match) not in meant:
                meant[(*loc[:-1], match)] = loc
            unknown[loc] = _unknown_key(str(loc[-1]), keys, match)
    out: list[Problem] = []
    by_key: dict[Loc, int] = {}  # a union's key -> its problem in `out`
    for e in errors:
        loc = tuple(e["loc"])
        if loc in meant and e["type"] == "missing":  # the key's place in the model's order: the unknown key's
            out.append(Problem(dotted(meant[loc]), unknown[meant[loc]]))
            continue
        if loc in unknown:
            if loc not in meant.values():
                out.append(Problem(dotted(loc), unknown[loc]))
            continue
        text = _message(e["msg"])
        key, tags = split_loc(model, loc)
        if not tags:
            out.append(Problem(dotted(loc), text))
        elif key in by_key:  # another member of the same union: one problem, each member's reason
            prior = out[by_key[key]]
            if text not in prior.text:
                out[by_key[key]] = Problem(prior.path, f"{prior.text}; or {text[:1].lower()}{text[1:]}")
        else:
            by_key[key] = len(out)
            out.append(Problem(dotted(key), text))
    return out


def _unknown_key(key: str, keys: list[str], match: str | None) -> str:
    shown = dotted((key,))
    if match is not None:
        return f"unknown key `{shown}` (did you mean `{match}`?)"
    if keys and len(keys) <= MAX_LISTED_KEYS:
        return f"unknown key `{shown}`: the keys here are {', '.join(f'`{k}`' for k in keys)}"
    return f"unknown key `{shown}` (the configuration reference lists the keys)"


def _message(msg: str) -> str:
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg.replace("\n", " ")


def model_keys(model: type[BaseModel] | None) -> list[str]:
    """The keys a model's mapping may hold: its fields' names, or their aliases where they have one (both when it
    takes either)."""
    if model is None:
        return []
    keys: list[str] = []
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
        if alias is None or model.model_config.get("populate_by_name"):
            keys.append(name)
        if alias is not None and alias != name:
            keys.append(alias)
    return keys


def _field_annotation(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias, field.validation_alias):
            return field.annotation
    return None


def _unwrap(annotation: Any) -> Any:
    """X for `X | None`; a union of several types as it is."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def split_loc(model: type[BaseModel], loc: Loc) -> tuple[Loc, Loc]:
    """`loc` as (the key path, the union member tags after it): pydantic names the member of a union that failed
    after the key (`start.datetime`, `spark.conf.x.int`); a tag is a part no field, list or mapping takes."""
    annotation: Any = model
    for i, part in enumerate(loc):
        annotation = _unwrap(annotation)
        origin = get_origin(annotation)
        if isinstance(part, int) and origin in (list, tuple):
            annotation = get_args(annotation)[0]
        elif _is_model(annotation) and isinstance(part, str):
            annotation = _field_annotation(annotation, part)
            if annotation is None:  # an unknown key
                return loc, ()
        elif origin is dict:
            annotation = get_args(annotation)[1]
        else:
            return loc[:i], loc[i:]
    return loc, ()


def model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model whose mapping is at `loc` (keys and list indices from `model`), or None when no model is there."""
    key, tags = split_loc(model, loc)
    if tags:
        return None
    annotation: Any = model
    for part in key:
        annotation = _unwrap(annotation)
        if isinstance(part, int) or get_origin(annotation) is dict:
            annotation = get_args(annotation)[-1] if get_origin(annotation) in (list, tuple, dict) else None
        elif _is_model(annotation):
            annotation = _field_annotation(annotation, part)
        else:
            return None
    annotation = _unwrap(annotation)
    return annotation if _is_model(annotation) else None
