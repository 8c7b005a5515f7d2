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
