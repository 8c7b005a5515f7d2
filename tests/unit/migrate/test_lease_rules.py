"""The lease rule without Kafka: who is live, and who holds a migration, from the latest record per key."""

from __future__ import annotations

import pytest

from transcoder.errors import MigrationError
from transcoder.migrate.lease import claim_offset, holder, live
from transcoder.migrate.state import StateRecord

NOW = 1_000_000


def rec(owner: str, offset: int, *, heartbeat_ms: int = NOW - 1000, lease_ms: int = 30_000,
        claim: int | None = None, command: str = "cutover") -> StateRecord:
    value = {"owner": owner, "command": command, "claim_offset": claim, "heartbeat_ms": heartbeat_ms,
             "lease_ms": lease_ms}
    return StateRecord(f"controller/{owner}", value, offset, heartbeat_ms)


def tomb(owner: str, offset: int) -> StateRecord:
    return StateRecord(f"controller/{owner}", None, offset, NOW)


def by_key(*records: StateRecord) -> dict[str, StateRecord]:
    return {r.key: r for r in records}


def test_nobody_holds_an_empty_log() -> None:
    assert holder({}, NOW) is None
    assert live({}, NOW) == []


def test_one_live_controller_holds() -> None:
    a = rec("a", 5)
    assert holder(by_key(a), NOW) == a


def test_a_first_record_claims_at_its_own_offset_and_renewals_keep_the_claim() -> None:
    assert claim_offset(rec("a", 7)) == 7
    assert claim_offset(rec("a", 42, claim=7)) == 7


def test_the_lowest_claim_holds_even_when_its_latest_record_is_newer() -> None:
    a = rec("a", 50, claim=10)  # claimed at 10, renewed at 50
    b = rec("b", 20)  # claimed at 20 (refused, but not yet deleted)
    assert holder(by_key(b, a), NOW) == a
    assert [r.key for r in live(by_key(b, a), NOW)] == ["controller/a", "controller/b"]


def test_an_expired_heartbeat_is_not_live_and_the_next_claim_holds() -> None:
    a = rec("a", 10, heartbeat_ms=NOW - 30_000)  # heartbeat + lease == now: expired
    b = rec("b", 20, heartbeat_ms=NOW - 29_999)
    assert holder(by_key(a, b), NOW) == b
    assert holder(by_key(a, b), NOW + 1) is None


def test_each_owner_expires_after_its_own_lease() -> None:
    short = rec("a", 10, heartbeat_ms=NOW - 5_000, lease_ms=2_000)
    long = rec("b", 20, heartbeat_ms=NOW - 5_000, lease_ms=60_000)
    assert holder(by_key(short, long), NOW) == long


def test_a_released_controller_is_not_live() -> None:
    b = rec("b", 30)
    assert holder(by_key(tomb("a", 25), b), NOW) == b
    assert holder(by_key(tomb("a", 25)), NOW) is None


def test_records_other_than_controllers_are_ignored() -> None:
    stage = StateRecord("group/orders-app", {"stage": "shadow", "heartbeat_ms": NOW, "lease_ms": 1}, 1, NOW)
    a = rec("a", 9)
    assert holder(by_key(stage, a), NOW) == a
    assert holder(by_key(stage), NOW) is None


def test_every_reader_agrees_whatever_the_order_of_the_mapping() -> None:
    records = [rec("c", 30), rec("a", 70, claim=12), rec("b", 12)]  # a tie on 12 cannot happen; decided by key
    first = holder(by_key(*records), NOW)
    assert first is not None and first.key == "controller/a"
    assert holder(by_key(*reversed(records)), NOW) == first


def test_a_malformed_controller_record_is_an_error_not_ignored() -> None:
    bad = StateRecord("controller/x", {"owner": "x"}, 3, NOW)
    with pytest.raises(MigrationError, match="offset 3") as err:
        holder(by_key(bad), NOW)
    assert "\n" not in str(err.value)
