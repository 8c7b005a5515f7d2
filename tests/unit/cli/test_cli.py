"""Argument parsing that needs no broker."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from transcoder.cli import main
from transcoder.cli.main import ByteSize, properties
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


def test_seed_start_takes_the_forms_every_time_option_takes():
    """--start is read as --since is (transcoder.cli.options.Time): a zone is needed; refused before connecting."""
    for value, says in (("2026-01-01T00:00:00", "--start '2026-01-01T00:00:00' needs a time zone"),
                        ("yesterday", "--start 'yesterday' is neither an ISO-8601 time")):
        res = CliRunner().invoke(main, ["seed", "-t", "t", "--kind", "nginx", "--count", "1", "--start", value,
                                        "-b", "127.0.0.1:1"])
        assert res.exit_code == 2 and res.stderr.startswith(f"transcoder: error: {says}"), res.stderr
