"""A copy through a real cluster's routine, under both guarantees at once (a lane of each copying the same source):
while they copy a source fed at ~500 records/s (RF 3, min.insync.replicas 2), the cluster goes through, in turn, the
exactly-once lane's transaction coordinator SIGKILLed mid-transaction (a node that also leads partitions of every
topic) and started again; a rolling restart of the other nodes (SIGTERM: controlled shutdown, started again) ending
in a preferred leader election, as every rolling upgrade ends; the destinations' partitions reassigned (their
replicas rotated, leadership moved by the election that follows).

Then, once the cluster is healthy (every ISR full), the copy must have caught up with everything fed within
RESUME_BOUND_S (docs/guarantees.md, "On a cluster"), and an independent read_committed reader must find every
source record: at-least-once, each at least once and in order; exactly-once, each exactly once, in order. Before
the raw client's broker list followed the cluster, a node restarted and handed leadership back stayed unknown to
it for up to 300 s (UnknownBrokerIdError on every Produce)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.support.configs import raw_config
from tests.support.instances import Feeder, Instance, wait_for
from tests.support.three_brokers import (
    elect_preferred,
    leader_of,
    read_committed,
    transaction_coordinator,
    wait_healthy,
    wait_leader,
)
from transcoder.kafka.clients import retriable

#: seconds from the cluster healthy again (every ISR full, preferred leaders elected) to the copy caught up with
#: every record fed (docs/guarantees.md, "On a cluster")
RESUME_BOUND_S = 30


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offsets of `topic`'s three partitions, summed (0 where none); -1 while the group's
    coordinator cannot answer (it moves with the faults: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a time-out)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    except KafkaException as exc:
        if retriable(exc.args[0]):
            return -1
        raise
    finally:
        c.close()
    return sum(max(0, tp.offset) for tp in tps)


def _reassign(bootstrap: str, admin: Any, topic: str) -> None:
    """Every partition's replicas rotated by one (the preferred leader moves to the next node): kafka-python's
    AlterPartitionReassignments, waited for until none is in progress."""
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    from transcoder.kafka.protocol import kafka_python_config

    kp = KafkaAdminClient(**kafka_python_config({"bootstrap.servers": bootstrap}))
    try:
        partitions = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
        moves = {KTopicPartition(topic, p): list(md.replicas[1:]) + list(md.replicas[:1])
                 for p, md in partitions.items()}
        refused = {tp: err for tp, err in kp.alter_partition_reassignments(moves).items() if err is not None}
        assert not refused, f"reassignment of {topic} refused: {refused}"
        deadline = time.monotonic() + 60
        while kp.list_partition_reassignments([*moves]):
            assert time.monotonic() < deadline, f"{topic}: reassignment still in progress after 60 s"
            time.sleep(0.5)
    finally:
        kp.close()


#: each guarantee's lane copies the same source into a destination of its own, through the same faults
GUARANTEES = {"at-least-once": "zstd", "exactly-once": "lz4"}


def test_a_copy_lives_through_the_clusters_routine(cluster3, cluster_topic, tmp_path):
    bootstrap, admin, local = cluster3.bootstrap, cluster3.admin, cluster3.local
    source = cluster_topic(3)
    feeder = Feeder(bootstrap, source, rate=500, first=5_000)
    lanes: dict[str, Instance] = {}
    phases: dict[str, float] = {}
    try:
        for guarantee, codec in GUARANTEES.items():
            raw = raw_config(cluster3, [{"source": source, "destinations": [{"codec": codec}]}],
                             guarantee=guarantee)
            raw["cluster"]["config"] = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000}
            path = tmp_path / f"{guarantee}.yaml"
            path.write_text(yaml.safe_dump(raw))
            lanes[guarantee] = Instance(str(path), guarantee)
        groups = {}
        for guarantee, lane in lanes.items():
            wait_for("the lane did not start", lambda lane=lane: lane.events("lane_started"), 120, lane)
            groups[guarantee] = lane.events("lane_started")[0]["group_id"]  # the lane's own: <group_id>.<lane>
            wait_for("the copy did not start", lambda g=groups[guarantee]: _committed(bootstrap, g, source) > 0,
                     120, lane)
        dests = [f"{source}.{codec}" for codec in GUARANTEES.values()]
        topics = [source, *dests]
        wait_healthy(admin, topics)
        t0 = time.monotonic()

        # 1. the exactly-once lane's transaction coordinator SIGKILLed mid-transaction: a node that leads partitions
        #    of the source and the destinations too (every node leads one of each topic's three), started again
        begun = lanes["exactly-once"].events("transactions_begun")
        assert begun, "".join(lanes["exactly-once"].lines[-40:])
        victim = transaction_coordinator(bootstrap, begun[-1]["transactional_id"])
        led = [(t, p) for t in topics for p in range(3) if leader_of(admin, t, p) == victim]
        assert led, f"node {victim} leads no partition of {topics}"
        local.kill(victim)
        for t, p in led:
            wait_leader(admin, t, p, not_on=victim)
        local.start(victim)
        phases["leader and transaction coordinator SIGKILL"], t0 = time.monotonic() - t0, time.monotonic()
        # 2. a rolling restart of the other nodes (controlled shutdown, one at a time, each once every replica is in
        #    sync again), ending in a preferred leader election, as every rolling upgrade ends
        for node in [n for n in local.nodes if n != victim]:
            wait_healthy(admin, topics, timeout=120)
            local.stop(node)
            local.start(node)
        wait_healthy(admin, topics, timeout=120)
        elect_preferred(admin, topics)
        phases["rolling restart"], t0 = time.monotonic() - t0, time.monotonic()
        # 3. the destinations' partitions reassigned (replicas rotated), leadership moved to the new preferred ones
        for dest in dests:
            _reassign(bootstrap, admin, dest)
        elect_preferred(admin, dests)
        wait_healthy(admin, topics, timeout=120)
        phases["reassignment"] = time.monotonic() - t0
        healthy_at = time.monotonic()
        fed = feeder.stop()
        resumed: dict[str, float] = {}
        for guarantee, lane in lanes.items():
            wait_for(f"{guarantee}: the copy did not catch up with the {fed} records fed within {RESUME_BOUND_S} s "
                     "of the cluster healthy again", lambda g=groups[guarantee]: _committed(bootstrap, g, source)
                     >= fed, max(1.0, healthy_at + RESUME_BOUND_S - time.monotonic()), lane)
            resumed[guarantee] = time.monotonic() - healthy_at
        for guarantee, lane in lanes.items():
            assert lane.stop() == 0, f"{guarantee}:\n" + "".join(lane.lines[-40:])
    finally:
        feeder.stop()
        for lane in lanes.values():
            if lane.proc.poll() is None:
                lane.proc.kill()
    print("phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()))
    want = read_committed(bootstrap, source)
    assert len(want) == fed
    for guarantee, codec in GUARANTEES.items():
        lane = lanes[guarantee]
        log = "".join(lane.lines)
        assert "Traceback" not in log, log[-3000:]
        got = read_committed(bootstrap, f"{source}.{codec}")
        for p in range(3):
            src = [r[3] for r in want if r[0] == p]
            copy = [r[3] for r in got if r[0] == p]
            if guarantee == "exactly-once":
                assert copy == src, f"{guarantee}, partition {p}: {len(copy)} copied of {len(src)}"
            else:  # every record, in order: a record copied again comes with those after it (a replay)
                firsts = list(dict.fromkeys(copy))
                assert firsts == src, f"{guarantee}, partition {p}: {len(set(copy))} distinct copied of {len(src)}"
        doubled = sum(n - 1 for n in Counter(r[3] for r in got).values())
        print(f"{guarantee}: {fed} records, {doubled} copied twice, caught up {resumed[guarantee]:.1f} s after the "
              "cluster was healthy")
