"""Pre-flight refuses destinations stored in the old message format (v0/v1), which transcoder's idempotent
producers and zstd cannot write, and zstd on brokers below inter.broker.protocol.version 2.1 — naming the topic
and why — and stays out of the way for brokers that store v2 only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaException

from transcoder.codecs import CODECS
from transcoder.kafka.provisioning import BrokerFormat, broker_format, format_problem


@pytest.mark.parametrize(("fmt", "magic"), [("0.10.2-IV0", 1), ("0.10.0", 1), ("0.9.0", 0), ("0.8.2", 0)])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_old_formats_are_refused_for_every_codec(fmt, magic, codec):
    msg = format_problem("logs.lz4", codec, fmt, "2.8-IV1")
    assert msg is not None
    assert msg.startswith(f"destination logs.lz4 would be stored in message format {fmt} (v{magic}): ")
    assert "idempotent producers need the v2 record format (message format 0.11.0 or newer)" in msg
    assert "\n" not in msg


def test_zstd_on_an_old_format_says_zstd_needs_v2():
    msg = format_problem("logs.zstd", "zstd", "0.10.2", "2.8")
    assert msg is not None
    assert "logs.zstd would be stored in message format 0.10.2 (v1): zstd needs the v2 record format" in msg
    assert "set message.format.version=2.1 on logs.zstd" in msg


@pytest.mark.parametrize("ibp", ["2.0", "2.0-IV1", "1.1", "0.11.0"])
def test_zstd_needs_ibp_2_1(ibp):
    msg = format_problem("logs.zstd", "zstd", "0.11.0", ibp)
    assert msg is not None and "zstd needs inter.broker.protocol.version 2.1" in msg and ibp in msg
    assert format_problem("logs.lz4", "lz4", "0.11.0", ibp) is None


@pytest.mark.parametrize(("fmt", "ibp"), [("0.11.0", "2.8"), ("2.0", "2.1"), ("2.1-IV2", "2.8-IV1"), ("2.8", "2.8")])
@pytest.mark.parametrize("codec", CODECS)
def test_v2_formats_pass(fmt, ibp, codec):
    assert format_problem("t", codec, fmt, ibp) is None


class _Admin:
    """An AdminClient answering list_topics and one broker's describe_configs."""

    def __init__(self, configs: dict[str, str] | None, *, fails: bool = False) -> None:
        self.configs, self.fails = configs, fails

    def list_topics(self, timeout: float) -> SimpleNamespace:
        if self.fails:
            raise KafkaException("no broker")
        return SimpleNamespace(brokers={3: None, 1: None})

    def describe_configs(self, resources, request_timeout: float) -> dict:
        (res,) = resources
        assert res.name == "1"  # the lowest broker id
        entries = {k: SimpleNamespace(value=v) for k, v in (self.configs or {}).items()}
        return {res: SimpleNamespace(result=lambda: entries)}


def test_broker_format_of_an_old_broker():
    admin = _Admin({"inter.broker.protocol.version": "2.8-IV1", "log.message.format.version": "0.10.2-IV0"})
    assert broker_format(admin) == BrokerFormat("2.8-IV1", "0.10.2-IV0")


@pytest.mark.parametrize("configs", [
    {},  # Kafka 4: no inter.broker.protocol.version
    {"inter.broker.protocol.version": "3.9-IV0", "log.message.format.version": "0.10.2"},  # ignored (KIP-724)
    {"inter.broker.protocol.version": "3.0", "log.message.format.version": "3.0"},
])
def test_brokers_that_store_only_v2_need_no_check(configs):
    assert broker_format(_Admin(configs)) is None


def test_unreadable_broker_configs_skip_the_check():
    assert broker_format(_Admin(None, fails=True)) is None
