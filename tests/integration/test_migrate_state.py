"""The migration state store and the controller lease against the real broker.

Every test has a state topic of its own (a fresh group id, so `<group_id>.migrations`) and a lease of 2 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.configs import make_config
from transcoder import config as cfg
from transcoder.errors import (
    KafkaUnavailableError,
    MigrationError,
    TopicError,
    TranscoderError,
)
from transcoder.kafka.admin import describe, describe_configs
from transcoder.migrate.lease import Lease, holder
from transcoder.migrate.state import StateStore, now_ms

LEASE_MS = 2000
ROUTES = [{"source": "a", "destinations": [{"codec": "zstd"}]}]


@pytest.fixture
def conf(kafka: object) -> cfg.Config:
    return make_config(kafka, ROUTES, migration={"lease_ms": LEASE_MS})


@pytest.fixture
def stores(conf: cfg.Config) -> Iterator[Callable[..., StateStore]]:
    made: list[StateStore] = []

    def make(migration: str = "orders.zstd", **kw: object) -> StateStore:
        s = StateStore(conf, migration, **kw)  # type: ignore[arg-type]
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


def test_put_read_round_trip_latest_wins_and_delete(stores: Callable[..., StateStore]) -> None:
    s = stores()
    first = s.put("group/app-1", {"stage": "shadow", "n": 1})
    s.put("group/app-2", {"stage": "shadow"})
    last = s.put("group/app-1", {"stage": "cutover", "offsets": {"0": 17}, "note": "é"})
    gone = s.delete("group/app-2")
    assert last > first and gone > last
    assert s.read() == {"group/app-1": {"stage": "cutover", "offsets": {"0": 17}, "note": "é"}}
    records = s.read_records()
    assert records["group/app-1"].offset == last
    assert records["group/app-2"].value is None and records["group/app-2"].offset == gone
    assert abs(records["group/app-1"].timestamp_ms - now_ms()) < 60_000
    offsets = s.put_many({"a": {"x": 1}, "b": {"y": 2}, "group/app-1": None})
    assert offsets["a"] < offsets["b"] < offsets["group/app-1"]
    assert s.read() == {"a": {"x": 1}, "b": {"y": 2}}
    # another process reads the same
    assert stores().read() == {"a": {"x": 1}, "b": {"y": 2}}


def test_two_migrations_share_the_topic_without_seeing_each_other(stores: Callable[..., StateStore]) -> None:
    one, two = stores("orders.zstd"), stores("orders.lz4")
    one.put("stage", {"v": 1})
    two.put("stage", {"v": 2})
    two.put("only-two", {"v": 3})
    one.delete("stage")
    assert one.read() == {}
    assert two.read() == {"stage": {"v": 2}, "only-two": {"v": 3}}
    assert stores("orders").read() == {}  # a prefix of another id is another migration
    with pytest.raises(Exception, match="no '/'"):
        stores("orders/zstd")


def test_topic_is_created_compacted_with_one_partition(stores: Callable[..., StateStore],
                                                       admin: AdminClient, conf: cfg.Config) -> None:
    s = stores()
    started = time.monotonic()
    assert s.read() == {}  # no topic yet: no state
    assert describe(admin, conf.state_topic) is None
    s.ensure_topic()
    assert s.read() == {}  # an empty topic
    assert time.monotonic() - started < 10
    shape = describe(admin, conf.state_topic)
    assert shape is not None and shape.partitions == 1
    assert describe_configs(admin, [conf.state_topic])[conf.state_topic].effective["cleanup.policy"] == "compact"


def test_an_existing_topic_that_is_not_compacted_is_refused(stores: Callable[..., StateStore],
                                                             topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(config={"cleanup.policy": "delete"})
    with pytest.raises(TopicError, match="cleanup.policy=delete") as err:
        stores(topic=topic).put("k", {"v": 1})
    _one_line(err.value)


def test_a_second_controller_is_refused_while_the_first_is_live(stores: Callable[..., StateStore]) -> None:
    first = Lease(stores(), lease_ms=LEASE_MS, owner="host-a:1:aaaaaa", command="cutover")
    second = Lease(stores(), lease_ms=LEASE_MS, owner="host-b:2:bbbbbb", command="rollback")
    with first:
        time.sleep(LEASE_MS * 1.5 / 1000)  # longer than the lease: only heartbeats keep it
        with pytest.raises(MigrationError) as err:
            second.acquire()
        msg = _one_line(err.value)
        assert msg.startswith("migration orders.zstd is held by controller host-a:1:aaaaaa (cutover, heartbeat ")
        assert "lease (2 s) to expire" in msg
        first.check()
        records = first.store.read_records()
        assert "controller/host-b:2:bbbbbb" not in records  # refused before it wrote anything
        h = holder(records, now_ms())
        assert h is not None and h.value is not None and h.value["owner"] == "host-a:1:aaaaaa"
        assert h.value["command"] == "cutover" and h.value["lease_ms"] == LEASE_MS
    assert first.store.read_records()["controller/host-a:1:aaaaaa"].value is None  # released: a tombstone
    second.acquire()
    second.check()
    second.release()


def test_a_crashed_controller_expires_and_is_fenced_when_it_comes_back(stores: Callable[..., StateStore]) -> None:
    crashed = Lease(stores(), lease_ms=LEASE_MS, command="cutover")
    crashed.acquire()
    crashed.start_heartbeats()
    crashed.stop_heartbeats()  # dies: no release
    crashed_at = time.monotonic()
    newcomer = Lease(stores(), lease_ms=LEASE_MS, command="cutover")
    with pytest.raises(MigrationError, match=crashed.owner):
        newcomer.acquire()
    time.sleep(max(0.0, LEASE_MS / 1000 + 0.2 - (time.monotonic() - crashed_at)))
    newcomer.acquire()
    newcomer.check()
    # the old one comes back: fenced, naming the controller that took over
    with pytest.raises(MigrationError) as err:
        crashed.check()
    msg = _one_line(err.value)
    assert f"controller {crashed.owner} was fenced: controller {newcomer.owner} (cutover) took over" in msg
    with pytest.raises(MigrationError, match="fenced"):
        crashed.heartbeat()
    assert not crashed.held
    newcomer.heartbeat()  # the holder is unaffected
    newcomer.check()
    crashed.release()  # deletes only its own, expired record
    newcomer.check()
    newcomer.release()


def test_a_paused_controller_loses_its_lease(stores: Callable[..., StateStore]) -> None:
    lease = Lease(stores(), lease_ms=LEASE_MS)
    lease.acquire()
    time.sleep(LEASE_MS / 1000 + 0.2)  # no heartbeat: expired, though nobody took over
    with pytest.raises(MigrationError, match=f"controller {lease.owner} lost its lease") as err:
        lease.check()
    _one_line(err.value)
    with pytest.raises(MigrationError, match="lost its lease"):
        lease.heartbeat()  # and it is not renewed
    other = Lease(stores(), lease_ms=LEASE_MS)
    other.acquire()
    other.release()
    lease.release()


def test_a_renewal_acknowledged_after_expiry_gives_the_lease_up(stores: Callable[..., StateStore],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    lease = Lease(stores(), lease_ms=LEASE_MS)
    lease.acquire()
    put = lease.store.put

    def slow_put(key: str, value: dict) -> int:  # a broker that holds the renewal past the lease
        time.sleep(LEASE_MS / 1000 + 0.1)
        return put(key, value)

    monkeypatch.setattr(lease.store, "put", slow_put)
    with pytest.raises(MigrationError, match="too late") as err:
        lease.heartbeat()
    _one_line(err.value)
    assert lease.store.read_records()[lease.key].value is None  # it revived nothing: its record is deleted
    with pytest.raises(MigrationError, match="too late"):
        lease.check()
    other = Lease(stores(), lease_ms=LEASE_MS)
    other.acquire()  # at once
    other.release()


def _race(lease: Lease, start: threading.Barrier, results: dict[str, TranscoderError | None]) -> None:
    start.wait()
    try:
        lease.acquire()
        results[lease.owner] = None
    except TranscoderError as exc:  # asserted on by the test
        results[lease.owner] = exc


def test_of_controllers_acquiring_at_once_exactly_one_wins(stores: Callable[..., StateStore]) -> None:
    stores().ensure_topic()
    for _ in range(3):
        leases = [Lease(stores(), lease_ms=LEASE_MS, owner=f"racer-{i}") for i in range(3)]
        for lease in leases:
            lease.store.ensure_topic()
        start = threading.Barrier(len(leases))
        results: dict[str, TranscoderError | None] = {}
        threads = [threading.Thread(target=_race, args=(lease, start, results)) for lease in leases]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(results) == len(leases), results
        winners = [o for o, e in results.items() if e is None]
        assert len(winners) == 1, results
        for e in results.values():
            if e is not None:
                assert isinstance(e, MigrationError), e
                assert f"held by controller {winners[0]}" in _one_line(e)
        records = stores().read_records()
        h = holder(records, now_ms())
        assert h is not None and h.value is not None and h.value["owner"] == winners[0]
        assert [k for k, r in records.items() if r.value is not None and k.startswith("controller/")] == \
            [f"controller/{winners[0]}"]  # the losers deleted their claims
        next(lease for lease in leases if lease.owner == winners[0]).release()


def test_nothing_listening_is_one_line_error_in_time() -> None:
    conf = cfg.parse({"cluster": {"bootstrap_servers": "127.0.0.1:1"}, "routes": ROUTES,
                      "migration": {"lease_ms": LEASE_MS}}, environ={})
    errors: dict[str, TranscoderError] = {}
    took: dict[str, float] = {}

    def attempt(name: str, call: Callable[[StateStore], object]) -> None:
        started = time.monotonic()
        with StateStore(conf, "orders.zstd") as s:
            try:
                call(s)
            except TranscoderError as exc:  # asserted on below
                errors[name] = exc
        took[name] = time.monotonic() - started

    calls: dict[str, Callable[[StateStore], object]] = {
        "read": lambda s: s.read(), "put": lambda s: s.put("k", {"v": 1}),
        "acquire": lambda s: Lease(s, lease_ms=LEASE_MS).acquire(),
    }
    threads = [threading.Thread(target=attempt, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert set(errors) == set(calls), errors
    for name, exc in errors.items():
        assert isinstance(exc, KafkaUnavailableError), (name, exc)
        msg = _one_line(exc)
        assert "127.0.0.1:1" in msg, msg
        assert took[name] < 20, (name, took[name])
