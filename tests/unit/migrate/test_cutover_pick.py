"""Which groups a cutover takes (migrate.cutover.pick): all it is given, or with --percent that share of them,
among those not on the destination yet."""

from __future__ import annotations

from transcoder.migrate.cutover import pick

STATE = {"group/a": {"stage": "destination"}, "group/b": {"stage": "source"}, "group/c": {"stage": "moving"},
         "group/d": {}}


def test_without_percent_every_group_given_in_its_order() -> None:
    assert pick(["d", "a", "b"], None, STATE) == ["d", "a", "b"]


def test_percent_is_a_share_of_all_rounded_up_taken_from_those_still_waiting() -> None:
    groups = ["a", "b", "c", "d"]  # a is moved already: b, c, d wait
    assert pick(groups, 25, STATE) == ["b"]
    assert pick(groups, 50, STATE) == ["b", "c"]
    assert pick(groups, 100, STATE) == ["b", "c", "d"]
    assert pick(groups, 1, STATE) == ["b"]  # at least one


def test_percent_when_every_group_has_moved_takes_none() -> None:
    assert pick(["a"], 50, STATE) == []
