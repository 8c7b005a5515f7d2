"""guarantee: exactly-once is refused, in one line saying why, where transcoder cannot make it exact."""

from __future__ import annotations

import pytest

from transcoder import config
from transcoder.errors import ConfigError


def _raw(**extra):
    return {"cluster": {"bootstrap_servers": "k:9092"}, "guarantee": "exactly-once",
            "routes": [{"source": "a", "destinations": [{"codec": "zstd", "level": 3}]}], **extra}


def test_default_is_at_least_once_and_exactly_once_parses():
    alo = config.parse({**_raw(), "guarantee": "at-least-once"}, environ={})
    assert alo.guarantee == "at-least-once" and alo.batched  # record sets, in compiled code
    conf = config.parse(_raw(), environ={})
    assert conf.guarantee == "exactly-once" and conf.transaction_timeout_ms == 60_000
    assert conf.batched  # record sets, through transcoder's transactional batch producer
    assert config.parse(_raw(migration={}), environ={}).batched  # the offset map in the same transactions
    assert config.parse(_raw(routes=[{"source": "a", "destinations": [{"codec": "zstd", "level": 19}]}]),
                        environ={}).batched  # zstd 13-22 too
    # record by record through librdkafka, when asked for
    assert not config.parse({**_raw(), "guarantee": "at-least-once", "hot_path": "records"}, environ={}).batched
    assert not config.parse(_raw(hot_path="records"), environ={}).batched


@pytest.mark.parametrize(("extra", "why"), [
    ({"hot_path": "records", "routes": [{"source": "a", "destinations": [{"codec": "zstd", "level": 19}]}]},
     "destination zstd-19 cannot be transactional record by record"),
    ({"lanes": "shared"}, "needs lanes: isolated"),
    ({"errors": {"tolerance": "all", "dlq_topic": "dlq"}}, "cannot dead-letter"),
    ({"commit_interval_ms": 40_000}, "must be at most half of transaction_timeout_ms"),
    ({"guarantee": "exactly_once"}, "guarantee"),
])
def test_what_cannot_be_exact_is_refused_in_one_line(extra, why):
    with pytest.raises(ConfigError) as info:
        config.parse(_raw(**extra), environ={})
    assert why in str(info.value)
    assert "\n" not in str(info.value)


def test_the_spark_engine_refuses_exactly_once_with_speculation_in_one_line():
    from transcoder.spark.engine import SparkEngine

    with pytest.raises(ConfigError, match="needs spark.speculation false") as info:
        SparkEngine(config.parse(_raw(spark={"conf": {"spark.speculation": True}}), environ={}))
    assert "\n" not in str(info.value)
    SparkEngine(config.parse(_raw(spark={"conf": {"spark.speculation": False}}), environ={}))
    SparkEngine(config.parse(_raw(), environ={}))


def test_the_service_refuses_exactly_once_onto_another_cluster_in_one_line():
    # the transactions would commit the group's offsets on the destination cluster; the lanes read the source's
    from transcoder.service.runner import Service

    raw = _raw(destination_cluster={"bootstrap_servers": "other:9092"})
    with pytest.raises(ConfigError, match="needs the destinations on the source cluster") as info:
        Service(config.parse(raw, environ={}))
    assert "\n" not in str(info.value)
    Service(config.parse({**raw, "guarantee": "at-least-once"}, environ={}))
