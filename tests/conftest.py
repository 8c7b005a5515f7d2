"""Session fixtures: one real Kafka broker for the whole run, and factories for fresh topics and clients.

Only fixtures and hooks live here; helpers the tests import are in tests/support.
"""

from __future__ import annotations

import os
import re
import resource
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster
from tests.support.proxy import Proxy
from tests.support.records import read_messages
from transcoder.dev.broker_process import LEAN_JVM
from transcoder.dev.local_kafka import LocalKafka
from transcoder.dev.ports import fixed_ports
from transcoder.kafka.admin import wait_leaders

#: The tests that take minutes start first (measured in a 4-worker run: 1-7 min each, most of it waiting on a fault
#: or a subprocess's JVM), in this order: on an xdist worker, one started last would be the run's tail.
LONGEST_FIRST = (
    "tests/integration/test_spark_standalone.py",
    "tests/integration/test_evaluate_truth.py",
    "tests/integration/test_image_steps.py",
    "tests/integration/test_faults.py",
    "tests/spark/",
    "tests/integration/test_migrate.py::test_sigkill",
    "tests/integration/test_bench.py",
    "tests/integration/test_docs_commands.py",
)


#: the session's SparkSession while it runs: stopped after the last test that uses it (its JVM idles at ~4% of a core
#: and holds ~1 GB for the rest of the session otherwise)
_SPARK_SESSIONS: list[object] = []


def _uses_spark_session(item: pytest.Item) -> bool:
    group = item.get_closest_marker("xdist_group")
    return bool(item.get_closest_marker("spark") and group is not None and group.args[:1] == ("spark",))


def _worker_order(item: pytest.Item) -> tuple[int, int]:
    """Spark's group (one SparkSession), the legacy cluster's group, the longest tests, the other tests that need a
    broker, then the unit tests, which fill the end."""
    if _uses_spark_session(item):
        return 0, 0
    if item.get_closest_marker("legacy"):
        return 1, 0
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return 2, rank
    return (3, 0) if item.get_closest_marker("kafka") else (4, 0)


#: Every Spark driver the tests start (the session's SparkSession, `transcoder run --engine spark` subprocesses) runs
#: with the test brokers' LEAN_JVM, through spark-submit's own SPARK_SUBMIT_OPTS: measured on a copy of 20,000 records,
#: 64 -> 38 CPU s a driver (C2's compiles and G1's threads are most of a short-lived driver's CPU).
os.environ.setdefault("SPARK_SUBMIT_OPTS", " ".join(LEAN_JVM))

#: TRANSCODER_TEST_TIMELINE=<file>: a line appended per test: its worker, start and end (epoch seconds), the CPU
#: seconds of the test process and of the subprocesses it waited for (CLIs, Spark drivers, MirrorMaker 2, a broker
#: restarted; not the session's broker) during it, and its node id: where a parallel run's time went
TIMELINE = os.environ.get("TRANSCODER_TEST_TIMELINE")


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    start, (own, children) = time.time(), _cpu()
    yield
    if _SPARK_SESSIONS and _uses_spark_session(item) and not (nextitem is not None and _uses_spark_session(nextitem)):
        _SPARK_SESSIONS.pop().stop()  # the tests that use it run one after another (_worker_order): the last one
    if TIMELINE:
        own_end, children_end = _cpu()
        with open(TIMELINE, "a") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{start:.1f}\t{time.time():.1f}\t"
                    f"{own_end - own:.1f}\t{children_end - children:.1f}\t{item.nodeid}\n")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `kafka` every test that needs the broker: it uses the `kafka` fixture, directly or through another
    fixture (admin, topic_factory, ...), or the legacy cluster (tests/legacy), so `pytest -m "not kafka"` runs
    exactly the tests that need none."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if item.nodeid.startswith("tests/legacy/"):
            # ZooKeeper, Kafka 3.9 and a broker of their own (tests/legacy/conftest.py): on one worker
            item.add_marker(pytest.mark.kafka)
            item.add_marker(pytest.mark.legacy)
            item.add_marker(pytest.mark.xdist_group("legacy"))
        if "kafka" in names:
            item.add_marker(pytest.mark.kafka)
        callspec = getattr(item, "callspec", None)
        if "spark" in names or (callspec is not None and callspec.params.get("engine") == "spark"):
            item.add_marker(pytest.mark.spark)
            # parallel runs (make test TEST_WORKERS=N: pytest-xdist, --dist loadgroup) run every Spark test in one
            # worker, one SparkSession (pytest < 9.2: pytest-xdist#1386)
            item.add_marker(pytest.mark.xdist_group("spark"))
    # on an xdist worker, the order in which its scheduler hands the tests out; in one process, the order they run in
    items.sort(key=_worker_order)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    external = os.environ.get("TRANSCODER_TEST_BOOTSTRAP")
    if external:
        yield Cluster(bootstrap=external, local=None)
        return
    local = LocalKafka(tmp_path_factory.mktemp("kafka"))
    # secured listeners: about 0.6 s more start-up; lean: half the broker's CPU (LEAN_JVM)
    st = local.up(proxy_port=fixed_ports(1)[0], secured=True, lean=True)
    certs = st.certs
    assert certs is not None and st.sasl_password_file is not None
    try:
        yield Cluster(bootstrap=st.bootstrap, local=local, proxied_bootstrap=st.proxied_bootstrap,
                      sasl_ssl_bootstrap=st.sasl_ssl_bootstrap, ssl_bootstrap=st.ssl_bootstrap, ca_file=certs.ca,
                      client_cert_file=certs.client_cert, client_key_file=certs.client_key,
                      client_key_password_file=certs.client_key_password, sasl_username=st.sasl_username,
                      sasl_password_file=Path(st.sasl_password_file))
    finally:
        local.down()


@pytest.fixture(scope="session")
def broker_proxy(kafka: Cluster) -> Iterator[Proxy]:
    """The TCP proxy in front of the broker's PROXIED listener: clients bootstrapping at
    `kafka.proxied_bootstrap` reach the broker only through it (outage tests cut or stall it)."""
    if kafka.local is None or kafka.proxied_bootstrap is None:
        pytest.skip("cutting the broker off needs the session's own broker, not TRANSCODER_TEST_BOOTSTRAP")
    st = kafka.local.state()
    assert st is not None and st.proxied_port is not None
    proxy = Proxy(int(kafka.proxied_bootstrap.rsplit(":", 1)[1]), st.proxied_port).start()
    yield proxy
    proxy.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local SparkSession for the whole test session (Spark's start-up is the expensive part)."""
    from transcoder.config import SparkConfig
    from transcoder.spark import session

    s = session.build(SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": 2}),
                      app_name="transcoder-tests")
    _SPARK_SESSIONS.append(s)
    yield s
    if s in _SPARK_SESSIONS:
        _SPARK_SESSIONS.remove(s)
        s.stop()


@pytest.fixture(params=["service", "service-records", "spark"])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., object]:
    """Each engine in turn, as `engine(config)` -> an object with run(until_caught_up=...), stop(), lanes,
    metrics, serve() and status(): the service (record sets, its default; and record by record, `hot_path:
    records`), or the Spark engine on the session's SparkSession (its checkpoints in a fresh directory)."""
    if request.param == "service":
        from transcoder.service.runner import Service

        return Service
    if request.param == "service-records":
        from transcoder.service.runner import Service

        return lambda conf: Service(conf.model_copy(update={"hot_path": "records"}))
    from transcoder.spark.engine import SparkEngine

    session = request.getfixturevalue("spark")
    checkpoints = tmp_path_factory.mktemp("checkpoints")

    def make(conf: object) -> object:
        spark_conf = conf.spark.model_copy(update={"checkpoint_location": str(checkpoints)})  # type: ignore[attr-defined]
        return SparkEngine(conf.model_copy(update={"spark": spark_conf}), spark=session)  # type: ignore[attr-defined]

    return make


@pytest.fixture(scope="session")
def admin(kafka: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka.bootstrap})


@pytest.fixture
def topic_factory(admin: AdminClient, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a fresh, uniquely named topic, every partition led: topic_factory(partitions=3, config={...})."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:80]

    def make(partitions: int = 1, config: dict[str, str] | None = None, name: str | None = None) -> str:
        topic = name or f"{base}-{uuid.uuid4().hex[:8]}"
        fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config or {})], operation_timeout=30)[topic]
        fut.result()
        # every partition led and answering, as transcoder waits for a topic it created: a write a moment after
        # CreateTopics can otherwise meet NOT_LEADER_OR_FOLLOWER (seen on a busy machine: test_stored_batches)
        wait_leaders(admin, topic)
        return topic

    return make


@pytest.fixture
def producer_factory(kafka: Cluster) -> Iterator[Callable[..., Producer]]:
    made: list[Producer] = []

    def make(**conf: object) -> Producer:
        p = Producer({"bootstrap.servers": kafka.bootstrap, **conf})
        made.append(p)
        return p

    yield make
    for p in made:
        p.flush(30)


@pytest.fixture
def consumer_factory(kafka: Cluster) -> Iterator[Callable[..., Consumer]]:
    made: list[Consumer] = []

    def make(**conf: object) -> Consumer:
        c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def read_topic(kafka: Cluster) -> Callable[..., list[Message]]:
    """Every record of a topic, from the beginning to the end offsets seen now, in partition order."""

    def read(topic: str, timeout: float = 60.0) -> list[Message]:
        return read_messages(kafka.bootstrap, topic, timeout=timeout)

    return read


@pytest.fixture
def fresh_structlog() -> Iterator[None]:
    """structlog's defaults for one test, so capture_logs sees every line: an earlier test's logging set-up (a level
    filter, loggers cached on first use) would hide some. A module's logger already bound stays cached: rebind it
    with monkeypatch (structlog.get_logger) inside the test."""
    import structlog

    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)
