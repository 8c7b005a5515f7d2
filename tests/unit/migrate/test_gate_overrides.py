"""Which cutover gates can be overridden, by which flag, and what a refusal says (issue 44: a cutover cannot be
forced into a gap): pure rules, no broker."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from transcoder.errors import ConfigError
from transcoder.migrate import gates


def facts(**over) -> gates.GateFacts:
    base = dict(group="g", members=(), committed={0: 40, 1: 50}, lane_committed={0: 100, 1: 100},
                source_ends={0: 100, 1: 100}, verified_through={0: 100, 1: 100}, map_source_end={0: 100, 1: 100},
                mismatch=None, last_error_ms=None, now_ms=1_000_000, max_lag_records=10, error_window_s=60)
    return gates.GateFacts(**{**base, **over})


#: every gate failing at once: members, copied (partition 0 behind), lag, verified, mismatch, errors
EVERYTHING_WRONG = facts(members=("app-1@/10.0.0.7",), lane_committed={0: 30, 1: 100}, source_ends={0: 100, 1: 200},
                         verified_through={0: 20, 1: 100}, map_source_end={0: 30, 1: 100},
                         mismatch="partition 1: source offset 7 / destination offset 7: value differs",
                         last_error_ms=1_000_000 - 5_000)


def test_the_table_classifies_every_gate_once() -> None:
    assert list(gates.RULES) == ["members", "copied", "lag", "verified", "mismatch", "errors", "rewind"]
    assert gates.OVERRIDABLE == ("lag", "verified", "errors")
    assert gates.NEVER_OVERRIDDEN == ("members", "copied", "mismatch", "rewind")
    assert [g.name for g in gates.failed(EVERYTHING_WRONG)] == list(gates.RULES)[:-1]


def test_overriding_everything_that_can_be_leaves_copied_mismatch_and_members_refusing() -> None:
    found = gates.failed(EVERYTHING_WRONG)
    refuse, forced = gates.blocking(found, gates.OVERRIDABLE)
    assert [g.name for g in refuse] == ["members", "copied", "mismatch"]
    assert [g.name for g in forced] == ["lag", "verified", "errors"]
    # naming a gate that cannot be overridden changes nothing either (the CLI's choice refuses it before)
    refuse, forced = gates.blocking(found, {"copied", "mismatch", "members"})
    assert [g.name for g in refuse] == ["members", "copied", "lag", "verified", "mismatch", "errors"] and forced == []


def test_each_overridable_gate_is_overridden_by_its_own_name_only() -> None:
    found = gates.failed(facts(source_ends={0: 100, 1: 200}, last_error_ms=1_000_000 - 5_000))
    assert [g.name for g in found] == ["lag", "errors"]
    refuse, forced = gates.blocking(found, {"lag"})
    assert [g.name for g in refuse] == ["errors"] and [g.name for g in forced] == ["lag"]
    refuse, forced = gates.blocking(found, {"lag", "errors"})
    assert refuse == [] and [g.name for g in forced] == ["lag", "errors"]


def test_the_refusal_line_names_the_flag_per_gate_or_that_none_exists() -> None:
    line = gates.refusal_line("g", gates.failed(EVERYTHING_WRONG))
    assert "\n" not in line and line.startswith("cutover of group g refused: members: group g has 1 active member(s)")
    assert line.endswith("; nothing was committed")
    parts = dict(p.split(": ", 1) for p in line.removeprefix("cutover of group g refused: ").split("; ")
                 if p.split(": ", 1)[0] in gates.RULES)
    assert set(parts) == {"members", "copied", "lag", "verified", "mismatch", "errors"}
    for name in ("lag", "verified", "errors"):
        assert parts[name].endswith(f"or override: --override {name})"), parts[name]
        assert "cannot be overridden" not in parts[name]
    for name in ("members", "copied", "mismatch"):
        assert "cannot be overridden: " in parts[name] and "--override" not in parts[name], parts[name]
    assert "--wait" in parts["members"] and "stop the group's consumers" in parts["members"]
    assert "check that `transcoder run` runs" in parts["copied"]
    assert "`transcoder migrate verify`" in parts["mismatch"] and "value differs" in parts["mismatch"]
    assert "--force" not in line


def test_a_refusal_line_is_exactly_the_gates_that_still_refuse() -> None:
    refuse, _ = gates.blocking(gates.failed(facts(lane_committed={0: 30, 1: 100}, max_lag_records=100)), {"lag"})
    assert gates.refusal_line("g", refuse) == (
        "cutover of group g refused: copied: the lane has copied partition 0 only up to offset 30, the group is at 40 "
        "(cannot be overridden: wait for the lane to copy up to the group: check that `transcoder run` runs and its "
        "lag falls); nothing was committed")


def test_overrides_names_only_overridable_gates() -> None:
    assert gates.overrides(["lag", "lag", "errors"]) == {"lag", "errors"}
    with pytest.raises(ConfigError, match=r"^--override copied: the copied gate cannot be overridden \(wait for"):
        gates.overrides(["lag", "copied"])
    with pytest.raises(ConfigError, match="--override lagg: no such gate; the gates that can be overridden: lag, "
                                          "verified, errors"):
        gates.overrides(["lagg"])


def test_outcomes_report_every_gate_in_order() -> None:
    found = gates.failed(facts(source_ends={0: 100, 1: 200}, mismatch="partition 0: value differs"))
    found += gates.rewind_gate("t.zstd", gates.rewinds({0: 90}, {0: 70}))
    got = {o.name: o for o in gates.outcomes(found, {"lag"})}
    assert list(got) == list(gates.RULES)
    assert {n: o.result for n, o in got.items()} == {
        "members": "pass", "copied": "pass", "lag": "overridden", "verified": "pass", "mismatch": "fail",
        "errors": "pass", "rewind": "fail"}
    assert got["lag"].how == "overridden by --override lag" and "lags 100 records" in got["lag"].detail
    assert got["mismatch"].how.startswith("cannot be overridden: ") and got["mismatch"].detail.endswith("differs")
    assert got["rewind"].detail == ("it would move the group backwards on t.zstd [0] from its committed offset 90 to "
                                    "70, delivering 20 record(s) again")
    assert got["copied"].detail == gates.RULES["copied"].checks and got["copied"].how == ""


def test_cutover_help_says_which_gates_can_be_overridden_and_refuses_the_others() -> None:
    from transcoder.cli import main

    runner = CliRunner()
    out = runner.invoke(main, ["migrate", "cutover", "--help"], terminal_width=200).output
    text = " ".join(out.split())
    assert "--override [lag|verified|errors]" in text and "--dry-run" in text
    assert "members, copied, mismatch, rewind are never overridden" in text
    assert "--force" not in text  # hidden: a deprecated alias
    bad = runner.invoke(main, ["migrate", "cutover", "-c", "nope.yaml", "-g", "g", "--override", "copied"])
    assert bad.exit_code == 2 and "'copied' is not one of 'lag', 'verified', 'errors'" in bad.output


def test_force_is_a_deprecated_alias_that_names_override(tmp_path) -> None:
    from transcoder.cli import main

    proc = CliRunner().invoke(main, ["migrate", "cutover", "-c", str(tmp_path / "none.yaml"), "-g", "g", "--force"])
    warning = proc.output.splitlines()[0]
    assert warning == ("transcoder: warning: --force is deprecated: it overrides lag, verified, errors (never members, "
                       "copied, mismatch, rewind); name the gates instead: --override lag --override verified "
                       "--override errors")
    assert proc.exit_code == 2  # then the missing config, as without --force


def test_a_dry_run_table_shows_each_gate_and_the_offsets_per_group(capsys) -> None:
    from transcoder.cli.migrate import _print_dry_run
    from transcoder.migrate.cutover import DryRun

    found = gates.failed(facts(lane_committed={0: 30, 1: 100}, max_lag_records=100, last_error_ms=1_000_000 - 5_000))
    plans = [DryRun("g1", "source", "refused", gates.outcomes(found, {"errors"}), {0: 40, 1: 50}, {0: 35, 1: 47},
                    ["errors"], gates.refusal_line("g1", gates.blocking(found, {"errors"})[0])),
             DryRun("g2", "destination", "already", [], {0: 9}, {0: 8}, [], "already on the destination")]
    _print_dry_run(plans, "table")
    out = capsys.readouterr().out
    assert "group g1 (source): refused; source offsets 0:40, 1:50 -> destination offsets 0:35, 1:47; forced: " \
           "errors" in out
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]] for line in out.splitlines()
            if line.count("│") > 3 and line.split("│")[1].strip() in gates.RULES}
    assert rows["copied"][0] == "fail" and rows["errors"][0] == "overridden" and rows["lag"][0] == "pass"
    assert "group g2 (destination): already; source offsets 0:9 -> destination offsets 0:8" in out
    _print_dry_run(plans, "json")
    got = json.loads(capsys.readouterr().out)
    assert [p["outcome"] for p in got] == ["refused", "already"]
    assert got[0]["destination_offsets"] == {"0": 35, "1": 47}
    assert {g["gate"]: g["result"] for g in got[0]["gates"]}["copied"] == "fail"
    assert got[0]["gates"][1]["how"].startswith("cannot be overridden: wait for the lane")
