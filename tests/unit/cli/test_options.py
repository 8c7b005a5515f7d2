"""transcoder.cli.options and transcoder.cli.help without a broker: the one time parser (--since/--until), partition
lists, old spellings that still work and warn in one line, choices refused in one line, and how --help lists the
commands (production, then development; migrate's steps in the order they are run)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from transcoder.cli import main
from transcoder.cli.options import Choice, Partitions, option, parse_when, partition_list
from transcoder.errors import ConfigError

NOW = 1_795_000_000_000


def _iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize(("value", "expected"), [
    ("1h", NOW - 3_600_000), ("30m", NOW - 1_800_000), ("1h30m", NOW - 5_400_000), ("2d", NOW - 172_800_000),
    ("90s", NOW - 90_000), ("1.5h", NOW - 5_400_000), (" 1H ", NOW - 3_600_000),
    ("2026-11-01T00:00:00Z", _iso_ms("2026-11-01T00:00:00+00:00")),
    ("2026-11-01T01:00:00+01:00", _iso_ms("2026-11-01T00:00:00+00:00")),
    ("1790000000000", 1_790_000_000_000),
])
def test_a_time_is_iso_epoch_ms_or_a_duration_back_from_now(value, expected):
    assert parse_when(value, "--since", NOW, past=True).ms(NOW) == expected


def test_a_duration_moves_with_the_clock_and_an_instant_does_not():
    back, at = parse_when("1h", "--since", NOW), parse_when("1790000000000", "--since", NOW)
    assert back.ms(NOW + 60_000) == NOW + 60_000 - 3_600_000 and at.ms(NOW + 60_000) == 1_790_000_000_000
    assert str(back) == "1h"


@pytest.mark.parametrize(("value", "says"), [
    ("yesterday", "neither an ISO-8601 time"), ("1x", "neither"), ("", "neither"), ("0m", "must be positive"),
    ("2026-11-01T00:00:00", "needs a time zone"), ("2099-01-01T00:00:00Z", "in the future"),
])
def test_a_time_that_is_not_one_is_refused_in_one_line(value, says):
    with pytest.raises(ConfigError, match=says) as exc:
        parse_when(value, "--since", NOW, past=True)
    assert "\n" not in str(exc.value) and exc.value.exit_code == 2 and str(exc.value).startswith("--since ")


def test_a_future_time_is_accepted_where_it_may_be():
    assert parse_when("2099-01-01T00:00:00Z", "--until", NOW).ms(NOW) == _iso_ms("2099-01-01T00:00:00+00:00")


def test_partitions_one_or_a_list_repeated_sorted_once():
    p = Partitions()
    assert p.convert("3", None, None) == [3] and p.convert("3,0, 3", None, None) == [3, 0, 3]
    assert partition_list(None, None, ([3], [0, 3], [1])) == [0, 1, 3]  # type: ignore[arg-type]
    assert partition_list(None, None, ()) is None  # type: ignore[arg-type]
    for bad in ("a", ",", "1;2", "-1"):
        with pytest.raises(ConfigError, match="give partition numbers"):
            p.convert(bad, None, None)


@click.command()
@option("--partition", "partitions", type=Partitions(), multiple=True, callback=partition_list, was=("--partitions",),
        help="Partitions.")
@option("--input-format", "fmt", type=Choice(["auto", "lines"], was={"plain": "lines"}), default="auto",
        was=("--format", "-F"), help="Input format.")
@option("--follow", "-f", is_flag=True, was=("--tail",), help="Follow.")
def probe(partitions: list[int] | None, fmt: str, follow: bool) -> None:
    click.echo(f"{partitions} {fmt} {follow}")


def _run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(probe, list(args))
    if isinstance(res.exception, ConfigError):  # transcoder's _Cli prints these; here, the message is enough
        return 2, res.stdout, str(res.exception)
    return res.exit_code, res.stdout, res.stderr


def test_an_old_spelling_gives_its_value_to_the_new_name_and_warns_in_one_line():
    assert _run("--input-format", "lines", "--partition", "1") == (0, "[1] lines False\n", "")
    code, out, err = _run("--format", "lines", "--partitions", "2,0", "--partitions", "1", "--tail")
    assert (code, out) == (0, "[0, 1, 2] lines True\n")
    assert err.splitlines() == [
        "transcoder: warning: `probe` --format is deprecated and will be removed: use --input-format",
        "transcoder: warning: `probe` --partitions is deprecated and will be removed: use --partition",
        "transcoder: warning: `probe` --tail is deprecated and will be removed: use --follow"]
    assert _run("-F", "lines")[1] == "None lines False\n"


def test_a_renamed_value_still_works_and_warns():
    code, out, err = _run("--input-format", "plain")
    assert (code, out) == (0, "None lines False\n")
    assert err == ("transcoder: warning: `probe` --input-format plain is deprecated and will be removed: use "
                   "--input-format lines\n")


def test_old_and_new_spelling_together_are_refused():
    both = (2, "", "give --input-format once: --format is its old spelling")
    assert _run("--format", "lines", "--input-format", "auto") == both
    assert _run("--input-format", "auto", "--format", "lines") == both


def test_a_value_not_among_the_choices_is_one_line_naming_them():
    assert _run("--input-format", "xml") == (2, "", "unknown --input-format 'xml'; choose one of auto, lines")


def test_old_spellings_are_not_in_help():
    help_text = _run("--help")[1]
    assert "--input-format" in help_text and "--partition " in help_text
    assert "--format" not in help_text and "--partitions" not in help_text and "--tail" not in help_text
    assert "plain" not in help_text


def test_a_real_commands_old_spelling_reaches_its_check(tmp_path: Path):
    """seed's -p was --partitions: given 0, it is refused as --partitions is, before anything connects."""
    res = CliRunner().invoke(main, ["seed", "-t", "t", "--kind", "nginx", "-n", "5", "-p", "0", "-b", "127.0.0.1:1"])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == "transcoder: error: --partitions must be positive, not 0"
    assert "-n is deprecated and will be removed: use --count" in res.stderr
    res = CliRunner().invoke(main, ["evaluate", "--engine", "local", "--kind", "nginx", "--count", "0"])
    assert res.exit_code == 2 and "--engine local is deprecated and will be removed: use --engine service" in res.stderr


def test_top_level_help_lists_production_then_development_commands():
    out = CliRunner().invoke(main, ["--help"]).stdout
    production, development = out.split("\nCommands:\n")[1].split("\nDevelopment commands:\n")
    assert [line.split()[0] for line in production.strip().splitlines()] == [
        "run", "validate", "report", "migrate", "evaluate", "spark"]
    assert [line.split()[0] for line in development.strip().splitlines()] == ["demo", "seed", "local-kafka"]


def test_migrate_help_lists_its_steps_in_the_order_they_are_run():
    out = CliRunner().invoke(main, ["migrate", "--help"]).stdout
    listed = [line.split()[0] for line in out.split("\nCommands:\n")[1].strip().splitlines()]
    assert listed == ["plan", "start", "verify", "cutover", "rollback", "status", "finish", "report", "watch"]


def test_every_command_sits_in_a_section_of_the_top_level_help():
    from transcoder.cli.help import SECTIONS

    placed = [name for _, names in SECTIONS for name in names]
    assert sorted(placed) == sorted(main.commands) and len(set(placed)) == len(placed)

