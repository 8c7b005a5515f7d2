"""Loading a config: YAML file, TRANSCODER__* environment overrides (the only reader of the environment), one-line
errors."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from transcoder.config.model import Config, SparkConfig
from transcoder.errors import ConfigError

ENV_PREFIX = "TRANSCODER__"


def _env_value(text: str) -> Any:
    """An override's value: a YAML flow list or mapping when it looks like one, else the string.

    Strings are left for pydantic to convert per field ("3" for a level, "true" for a flag), so a
    group id or topic named 2024 stays a string.
    """
    if text.strip()[:1] in ("[", "{"):
        return yaml.safe_load(text)
    return text


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
                node[int(last)] = _env_value(environ[name])
            else:
                node[last] = _env_value(environ[name])
        except (IndexError, ValueError, TypeError, AttributeError):
            raise ConfigError(f"{name}: no {'.'.join(path)} to override") from None
    return raw


def _one_line(exc: ValidationError, source: str) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]).replace("\n", "\\n")
        msg = err["msg"].removeprefix("Value error, ").replace("\n", " ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return f"{source}: " + "; ".join(parts)


def parse(raw: Any, *, source: str = "config", environ: Mapping[str, str] | None = None) -> Config:
    """Validate a config mapping (after env overrides); ConfigError with every problem on one line."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping, not {type(raw).__name__}")
    environ = os.environ if environ is None else environ
    raw = _apply_env(raw, environ)
    try:
        return Config.model_validate(raw, context={"environ": environ})
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, source)) from None


def load(path: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{at} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return parse(raw, source=str(path), environ=environ)


def with_spark_master(config: Config, master: str) -> Config:
    """The config with another Spark master (`--master`), validated as spark.master is."""
    try:
        spark = SparkConfig.model_validate({**config.spark.model_dump(), "master": master})
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, "--master")) from None
    return config.model_copy(update={"spark": spark})
