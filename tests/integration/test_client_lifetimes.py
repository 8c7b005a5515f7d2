"""Admin clients asked without waiting are destroyed by their owners, never by the garbage collector.

confluent-kafka sets an admin result from librdkafka's background thread, running Python there; a client collected
on that thread (its owner in a reference cycle, as a lane is) makes librdkafka abort the process ("calling
rd_kafka_destroy() from librdkafka owned thread is prohibited"). Each case runs in a process of its own, so an abort
fails the test instead of the session.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.support.configs import raw_config

# An owner in a reference cycle with a query in flight, closed as owners must, then dropped; the collector set to
# run at almost every allocation, as the answer's arrival on the background thread allocates.
_OWNER_IN_A_CYCLE = textwrap.dedent("""
    import gc, sys, time
    from transcoder.kafka.topic_ids import TopicIds
    from transcoder.kafka.watermarks import EndOffsets
    bootstrap, topic, which = sys.argv[1:4]

    class Owner:
        def __init__(self):
            self.me = self
            if which == "topic-ids":
                self.q = TopicIds({"bootstrap.servers": bootstrap}, "lifetimes", lambda make: (self, make())[1])
                self.q.now([topic])  # connected
                self.q.ask([topic])  # in flight
            else:
                self.q = EndOffsets({"bootstrap.servers": bootstrap}, "lifetimes", lambda make: (self, make())[1])
                self.q.refresh([(topic, 0)])
                time.sleep(1)  # connected
                self.q.refresh([(topic, 0)])  # in flight

    for _ in range(5):
        o = Owner()
        getattr(o.q, "close", lambda: None)()  # (none before OwnedAdmin: the abort shows)
        del o
        gc.set_threshold(1)
        time.sleep(0.5)
        gc.set_threshold(700)
    print("survived")
""")

# A service run to its end with the collector off: every admin client it made must be gone by then.
_SERVICE_RUN = textwrap.dedent("""
    import gc, json, sys
    gc.disable()
    from confluent_kafka.admin import AdminClient
    from transcoder import config as cfg
    from transcoder.service.runner import Service
    for hot_path in ("batches", "records"):
        raw = json.loads(sys.argv[1])
        raw["hot_path"] = hot_path
        raw["group_id"] += "-" + hot_path
        Service(cfg.parse(raw, environ={})).run(until_caught_up=True)
    left = [o for o in gc.get_objects() if isinstance(o, AdminClient)]
    print("admin clients left to the collector:", len(left))
""")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("which", ["topic-ids", "end-offsets"])
def test_an_owner_in_a_reference_cycle_closes_its_admin_client_so_the_process_survives(
        kafka: Any, topic_factory: Any, which: str) -> None:
    topic = topic_factory(partitions=1)
    done = _run(_OWNER_IN_A_CYCLE, kafka.bootstrap, topic, which)
    # before OwnedAdmin: exit -6, "rdkafka.c:1207:rd_kafka_destroy_app: assert: ... librdkafka owned thread"
    assert (done.returncode, done.stdout.strip()) == (0, "survived"), done.stderr[-2000:]


def test_a_service_run_leaves_no_admin_client_to_the_garbage_collector(
        kafka: Any, topic_factory: Any, producer_factory: Any) -> None:
    source = topic_factory(partitions=1)
    p = producer_factory()
    for i in range(10):
        p.produce(source, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    raw = raw_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}])
    done = _run(_SERVICE_RUN, json.dumps(raw))
    # before OwnedAdmin: 2 (lanes' query clients, kept alive by each lane's reference cycle)
    assert (done.returncode, done.stdout.strip().splitlines()[-1:]) == \
        (0, ["admin clients left to the collector: 0"]), done.stderr[-2000:]
