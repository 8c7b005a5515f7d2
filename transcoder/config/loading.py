"""Loading a config: YAML file (a key given twice is an error), TRANSCODER__* environment overrides (the only reader
of the environment), reserved topics, errors naming every problem (config.problems) and the line of a reserved topic."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from transcoder.config import reserved
from transcoder.config.model import Config
from transcoder.config.problems import ConfigProblems, Problem, dotted, from_validation
from transcoder.config.reserved import Loc
from transcoder.config.spark import SparkConfig
from transcoder.errors import ConfigError

ENV_PREFIX = "TRANSCODER__"

_MERGE_TAGS = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")


class _DuplicateKey(yaml.YAMLError):  # type: ignore[misc]  # PyYAML's classes are Any: no types in the venv
    def __init__(self, key: Any, at: yaml.Mark, first: yaml.Mark) -> None:
        def where(mark: yaml.Mark) -> str:  # a column only where both are on one line, e.g. {codec: a, codec: b}
            return f"line {mark.line + 1}" + (f", column {mark.column + 1}" if at.line == first.line else "")
        super().__init__(f"{where(at)}: key {key!r} given twice (first at {where(first)})")


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML's classes are Any: no types in the venv
    """PyYAML's safe loader, refusing a key given twice in one mapping (PyYAML would keep the last one silently).

    Merge keys work as before: a key written beside `<<` overrides the merged one, as YAML's merge key means."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # SafeConstructor.construct_mapping flattens every mapping first (merging `<<` into it), and flattening a
        # mapping flattens the ones merged into it: here each mapping is seen as written, before a merge adds to it.
        if id(node) not in self._checked:
            self._checked.add(id(node))
            first: dict[Any, yaml.Mark] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # a list or mapping as a key: SafeLoader refuses it as unhashable
                key = key_node.value if key_node.tag in _MERGE_TAGS else self.construct_object(key_node)
                if key in first:
                    raise _DuplicateKey(key, key_node.start_mark, first[key])
                first[key] = key_node.start_mark
        super().flatten_mapping(node)


def _lines(node: yaml.Node | None) -> dict[Loc, int]:
    """The line of each key and list entry of a composed document, by its path (as pydantic's error locations name
    it); a merged key by the line it is written on. A node reached again through an alias is not walked again (an
    alias inside itself, or aliases of aliases, would never end): the paths through it name the line of the alias."""
    out: dict[Loc, int] = {}
    walked: set[int] = set()

    def walk(node: yaml.Node, at: Loc) -> None:
        if id(node) in walked:
            return
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    out[(*at, key_node.value)] = key_node.start_mark.line + 1  # the last: the one in effect
                    walk(value, (*at, key_node.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out[(*at, i)] = item.start_mark.line + 1
                walk(item, (*at, i))

    if node is not None:
        walk(node, ())
    return out


def read_yaml(text: str) -> tuple[Any, dict[Loc, int]]:
    """A YAML document as plain data, and the line of each key and list entry in it (`_lines`). yaml.YAMLError for
    text that is not YAML, or with a key given twice in one mapping."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return data, _lines(node)


def _env_value(name: str, text: str) -> Any:
    """An override's value: a YAML flow list or mapping when it looks like one, else the string.

    Strings are left for pydantic to convert per field ("3" for a level, "true" for a flag), so a
    group id or topic named 2024 stays a string.
    """
    if text.strip()[:1] not in ("[", "{"):
        return text
    try:
        return read_yaml(text)[0]
    except _DuplicateKey as exc:
        raise ConfigError(f"{name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: not a valid YAML flow list or mapping: {getattr(exc, 'problem', exc)}") from None


def _apply_env(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """TRANSCODER__CLUSTER__BOOTSTRAP_SERVERS=x sets cluster.bootstrap_servers (on a copy of raw)."""
    raw = copy.deepcopy(raw)
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX):].split("__") if p]
        if not path:
            continue
        node: Any = raw
        try:
            for part in path[:-1]:
                node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
            last = path[-1]
            if isinstance(node, list):
                node[int(last)] = _env_value(name, environ[name])
            else:
                node[last] = _env_value(name, environ[name])
        except (IndexError, ValueError, TypeError, AttributeError):
            raise ConfigError(f"{name}: no {'.'.join(path)} to override") from None
    return raw


def _overrides(environ: Mapping[str, str]) -> dict[Loc, str]:
    """The path each TRANSCODER__* variable overrides, and its name."""
    out: dict[Loc, str] = {}
    for name in environ:
        if name.startswith(ENV_PREFIX):
            path = [p.lower() for p in name[len(ENV_PREFIX):].split("__") if p]
            out[tuple(int(p) if p.isdigit() else p for p in path)] = name
    return out


def _where(loc: Loc, lines: Mapping[Loc, int], overrides: Mapping[Loc, str]) -> str | None:
    """Where the key at `loc` is set: `line 7` (the line of the key, or of the nearest entry around it that is
    written in the file), or the TRANSCODER__... variable that set it; None when neither is known."""
    for n in range(len(loc), 0, -1):
        if loc[:n] in overrides:
            return overrides[loc[:n]]
    for n in range(len(loc), 0, -1):
        if loc[:n] in lines:
            return f"line {lines[loc[:n]]}"
    return None


def parse(raw: Any, *, source: str = "config", environ: Mapping[str, str] | None = None,
          lines: Mapping[Loc, int] | None = None) -> Config:
    """Validate a config mapping (after env overrides), reserved topics included; ConfigProblems (a ConfigError)
    naming every problem, one per line (config.problems). `lines`: where each key is written (read_yaml), for the
    reserved topics' errors."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping, not {type(raw).__name__}")
    environ = os.environ if environ is None else environ
    raw = _apply_env(raw, environ)
    try:
        config = Config.model_validate(raw, context={"environ": environ})
    except ValidationError as exc:
        raise ConfigProblems(source, from_validation(exc, Config)) from None
    found = list(reserved.problems(config))
    if found:
        overrides = _overrides(environ)
        raise ConfigProblems(source, [Problem(dotted(loc), msg, _where(loc, lines or {}, overrides))
                                      for loc, msg in found])
    return config


def load(path: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """The config in a YAML file (`parse`): ConfigError naming the file for anything wrong with it (every problem
    of its content, one per line)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        raw, lines = read_yaml(text)
    except _DuplicateKey as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except ValueError as exc:  # PyYAML's constructors raise it bare, e.g. for the impossible date 2020-13-45
        raise ConfigError(f"{path}: a value is not valid YAML: {exc} (quote it to keep it a string)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{at} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse(raw, source=str(path), environ=environ, lines=lines)


def with_spark_master(config: Config, master: str) -> Config:
    """The config with another Spark master (`--master`), validated as spark.master is."""
    try:
        spark = SparkConfig.model_validate({**config.spark.model_dump(), "master": master})
    except ValidationError as exc:
        raise ConfigProblems("--master", from_validation(exc, SparkConfig)) from None
    return config.model_copy(update={"spark": spark})
