"""transcoder.kafka.protocol.kafka_python_config: librdkafka properties -> kafka-python admin client arguments."""

from __future__ import annotations

import pytest

from transcoder.kafka.protocol import RawClient, kafka_python_config


@pytest.mark.parametrize("bootstrap,expected", [
    ("a:9092", ["a:9092"]),
    ("a:9092,b:9093,c:9094", ["a:9092", "b:9093", "c:9094"]),
])
def test_bootstrap_split(bootstrap, expected):
    assert kafka_python_config({"bootstrap.servers": bootstrap}) == {"bootstrap_servers": expected}


def test_full_security_mapping():
    conf = kafka_python_config({
        "bootstrap.servers": "a:9093,b:9093",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "scram-sha-512",
        "sasl.username": "alice",
        "sasl.password": "MiXeD-Pw",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/client.pem",
        "ssl.key.location": "/etc/client.key",
        "ssl.key.password": "KeyPw",
        "client.id": "Transcoder-1",
    })
    assert conf == {
        "bootstrap_servers": ["a:9093", "b:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "MiXeD-Pw",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_certfile": "/etc/client.pem",
        "ssl_keyfile": "/etc/client.key",
        "ssl_password": "KeyPw",
        "client_id": "Transcoder-1",
    }


def test_plural_sasl_mechanisms_is_upper_cased():
    conf = kafka_python_config({"bootstrap.servers": "a:1", "sasl.mechanisms": "plain"})
    assert conf == {"bootstrap_servers": ["a:1"], "sasl_mechanism": "PLAIN"}


@pytest.mark.parametrize("value,expected", [("none", False), ("NONE", False), ("https", None), (None, None)])
def test_endpoint_identification(value, expected):
    lib = {"bootstrap.servers": "a:1", "security.protocol": "SSL"}
    if value is not None:
        lib["ssl.endpoint.identification.algorithm"] = value
    conf = kafka_python_config(lib)
    assert conf.get("ssl_check_hostname", None) is expected
    assert "ssl.endpoint.identification.algorithm" not in conf


def test_unknown_librdkafka_keys_are_ignored():
    conf = kafka_python_config({"bootstrap.servers": "a:1", "socket.timeout.ms": 1000, "debug": "all",
                                "statistics.interval.ms": 5000, "sasl.kerberos.keytab": "/k"})
    assert conf == {"bootstrap_servers": ["a:1"]}


def test_input_is_not_mutated():
    lib = {"bootstrap.servers": "a:1,b:2", "security.protocol": "ssl"}
    kafka_python_config(lib)
    assert lib == {"bootstrap.servers": "a:1,b:2", "security.protocol": "ssl"}


def test_raw_client_connects_lazily():
    info = RawClient({"bootstrap.servers": "unreachable.invalid:9092"})
    assert info.partition_sizes([]) == {}
    assert info.topic_sizes([]) == {}
    info.close()  # nothing opened, nothing to close


class _Manager:
    """kafka-python's connection manager as RawClient._start uses it: call_soon hands back a Future that this one
    completes only when told to (a request its I/O thread never answers)."""

    def __init__(self) -> None:
        from kafka.future import Future

        self.future = Future()
        self.calls: list[tuple] = []

    def call_soon(self, coro, *args):
        self.calls.append((coro, args))
        return self.future


def _info_with(manager: _Manager, timeout_s: float) -> RawClient:
    from types import SimpleNamespace

    info = RawClient({"bootstrap.servers": "localhost:1"}, timeout_s=timeout_s)
    info._admin, info._connections = SimpleNamespace(), manager  # as if opened: the admin client and its manager
    return info


def test_a_request_never_answered_times_out_instead_of_holding_the_caller():
    import time

    from kafka.errors import KafkaTimeoutError

    manager = _Manager()
    info = _info_with(manager, timeout_s=0.1)
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="no answer from Kafka within 5 s"):
        info._start(lambda: None).result()  # request timeout 0.1 s + the 5 s margin
    assert 5.0 <= time.monotonic() - t0 < 15
    with pytest.raises(KafkaTimeoutError, match="within 0 s"):
        info._start(lambda: None, limit_s=0.2).result()


def test_an_answer_or_an_error_comes_back_as_kafka_python_gave_it():
    from kafka.errors import NodeNotReadyError

    manager = _Manager()
    manager.future.success("answer")
    assert _info_with(manager, 1)._start(lambda x: x, 7).result() == "answer"
    assert manager.calls[0][1] == (7,)
    failing = _Manager()
    failing.future.failure(NodeNotReadyError(3))
    with pytest.raises(NodeNotReadyError):
        _info_with(failing, 1)._start(lambda: None).result()


class _Awaited:
    """What kafka-python's manager.send hands back, as awaited: the broker's answer, at once."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __await__(self):
        return self.value
        yield  # a generator: awaitable


class _Cluster:
    """kafka-python's ClusterMetadata as RawClient reaches it: the answers applied, and the refreshes asked."""

    def __init__(self) -> None:
        self.applied: list[object] = []
        self.refreshes = 0

    def update_metadata(self, response: object) -> None:
        self.applied.append(response)

    def request_update(self) -> None:
        self.refreshes += 1


class _ConnectionManager:
    """kafka-python's connection manager run inline: call_soon runs the coroutine to its end at once; send answers
    with `answer`, or raises UnknownBrokerIdError for a broker id the broker list does not hold."""

    def __init__(self, answer: object) -> None:
        self.cluster = _Cluster()
        self.answer = answer

    def send(self, request: object, node_id: int | None = None, request_timeout_ms: int | None = None) -> _Awaited:
        from kafka.errors import UnknownBrokerIdError

        if node_id == 3:
            raise UnknownBrokerIdError(3)
        return _Awaited(self.answer)

    def call_soon(self, coro, *args):
        from kafka.future import Future

        future, running = Future(), coro(*args)
        try:
            running.send(None)
        except StopIteration as done:
            future.success(done.value)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, as kafka-python's I/O thread does
            future.failure(exc)
        return future


def test_every_metadata_answer_becomes_the_broker_list_of_every_connection():
    # the producer's Metadata named broker 3 leader while kafka-python's broker list (refreshed every 300 s) had no
    # broker 3 since its restart: every Produce failed with UnknownBrokerIdError for up to 300 s
    from types import SimpleNamespace

    part = SimpleNamespace(partition_index=0, leader_id=3, error_code=0)
    answer = SimpleNamespace(topics=[SimpleNamespace(name="t", error_code=0, partitions=[part])])
    manager = _ConnectionManager(answer)
    info = RawClient({"bootstrap.servers": "localhost:1"})
    info._admin, info._connections = SimpleNamespace(), manager
    assert info.leaders(["t"]) == {("t", 0): 3}
    assert manager.cluster.applied == [answer]


def test_a_broker_id_the_list_does_not_hold_asks_for_the_list_again_at_once():
    from types import SimpleNamespace

    from kafka.errors import UnknownBrokerIdError

    manager = _ConnectionManager(None)
    info = RawClient({"bootstrap.servers": "localhost:1"})
    info._admin, info._connections = SimpleNamespace(), manager
    with pytest.raises(UnknownBrokerIdError):
        info.produce({("t", 0): b"batch"}, leader=3)
    assert manager.cluster.refreshes == 1


def test_the_broker_list_is_asked_again_every_30_s_unless_the_cluster_config_says(monkeypatch: pytest.MonkeyPatch):
    import kafka.admin

    made: list[dict] = []
    monkeypatch.setattr(kafka.admin, "KafkaAdminClient", lambda **kwargs: made.append(kwargs))
    RawClient({"bootstrap.servers": "a:9092"})._client()
    RawClient({"bootstrap.servers": "a:9092", "metadata.max.age.ms": 60_000})._client()
    assert [m["metadata_max_age_ms"] for m in made] == [30_000, 60_000]  # kafka-python's own default: 300 s
