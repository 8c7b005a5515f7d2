"""Optional command-line tools some tests need: skipped where missing on a developer's machine, failed in CI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest


def in_ci() -> bool:
    """True when the environment variable CI is set (CI=true, as CI runs .ci/run), unless it is empty/0/false."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_tool(name: str, how_to_install: str, *, alternatives: Iterable[str | Path] = ()) -> str:
    """The path of the command `name` (or of the first alternative found: another command name, or a Path).

    Missing, the calling test is skipped with a reason naming the tool and how to install it; when CI is set it
    fails instead, so that CI can never pass by silently skipping what it is meant to run.
    """
    for candidate in (name, *alternatives):
        if isinstance(candidate, Path):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        elif found := shutil.which(candidate):
            return found
    reason = f"{name} is not installed; {how_to_install}"
    if in_ci():
        pytest.fail(f"{reason} (CI is set: a missing tool fails the test instead of skipping it)", pytrace=False)
    pytest.skip(reason)
