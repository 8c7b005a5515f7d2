"""Service configs for tests against the session's broker: a fresh group id, quick commits, no endpoint."""

from __future__ import annotations

import time
from typing import Any

from transcoder import config as cfg


def raw_config(kafka: Any, routes: list[dict], **extra: Any) -> dict:
    """A config for the session's broker with a fresh group id and quick commits."""
    return {"cluster": {"bootstrap_servers": kafka.bootstrap}, "group_id": f"t-{time.monotonic_ns()}",
            "routes": routes, "metrics": {"port": 0}, "commit_interval_ms": 200, **extra}


def make_config(kafka: Any, routes: list[dict], **extra: Any) -> cfg.Config:
    return cfg.parse(raw_config(kafka, routes, **extra), environ={})
