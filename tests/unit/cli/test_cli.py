"""Argument parsing that needs no broker."""

from __future__ import annotations

import click
import pytest

from transcoder.cli.main import ByteSize, properties
from transcoder.cli.seed import _start_ms
from transcoder.errors import ConfigError


@pytest.mark.parametrize("text,expected", [
    ("1000", 1000), ("250MB", 250_000_000), ("250mb", 250_000_000), ("1.5GiB", 1_610_612_736),
    ("64KiB", 65_536), ("2k", 2000), (" 10 MB ", 10_000_000),
])
def test_byte_size(text, expected):
    assert ByteSize().convert(text, None, None) == expected


@pytest.mark.parametrize("text", ["", "MB", "-1MB", "1XB", "ten"])
def test_byte_size_rejects(text):
    with pytest.raises(click.BadParameter):
        ByteSize().convert(text, None, None)


def testproperties():
    assert properties(("a=1", " b = x=y ")) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="expected key=value"):
        properties(("novalue",))


def test_start_ms_needs_a_zone():
    assert _start_ms("2026-01-01T00:00:00Z") == 1_767_225_600_000
    assert _start_ms(None) is None
    with pytest.raises(ConfigError, match="needs a time zone"):
        _start_ms("2026-01-01T00:00:00")
    with pytest.raises(ConfigError, match="not an ISO-8601"):
        _start_ms("yesterday")
