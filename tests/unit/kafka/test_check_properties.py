"""librdkafka's verdict on a config's client properties (kafka.clients.check_properties): every property it refuses,
one per line, never a secret's value; a throwaway client with no brokers, so no network."""

from __future__ import annotations

import pytest

from transcoder.config.problems import ConfigProblems
from transcoder.errors import ConfigError
from transcoder.kafka.clients import check_properties

WHERE = "cluster.config (the source cluster)"
HINT = ": fix or remove the property (librdkafka's CONFIGURATION.md lists them)"
SECRET = "hunter2-never-shown"


def test_good_properties_pass():
    check_properties({"bootstrap.servers": "k:9092", "socket.timeout.ms": 1000, "client.id": "x"}, WHERE)


def test_one_refused_property_is_one_line():
    with pytest.raises(ConfigError) as info:
        check_properties({"no.such.property": 1, "client.id": "x"}, WHERE)
    assert str(info.value) == f'{WHERE}: No such configuration property: "no.such.property"{HINT}'


def test_every_refused_property_is_named_a_line_each_and_no_secret():
    with pytest.raises(ConfigProblems) as info:
        check_properties({"no.such.property": 1, "client.id": "x", "socket.timeout.ms": 5,
                          "sasl.password": SECRET, "sasl.username": "u"}, WHERE)
    assert str(info.value) == "\n".join([
        f"{WHERE}: 2 problems:",
        f'  No such configuration property: "no.such.property"{HINT}',
        f'  Configuration property "socket.timeout.ms" value 5 is outside allowed range 10..300000{HINT}'])
    assert info.value.exit_code == 2 and SECRET not in str(info.value)
