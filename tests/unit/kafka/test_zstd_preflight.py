"""Pre-flight explains, in plain words, why zstd cannot be produced to brokers older than Kafka 2.1."""

from __future__ import annotations

from transcoder import config
from transcoder.kafka.provisioning import zstd_problem
from transcoder.pipeline import routes


def _plan(codecs: list[str]) -> routes.Plan:
    conf = config.parse({"cluster": {"bootstrap_servers": "x:1"},
                         "routes": [{"source": "logs", "destinations": [{"codec": c} for c in codecs]}]},
                        environ={})
    return routes.plan(conf, ["logs"])


def test_old_brokers_refuse_zstd_naming_the_destination_and_the_error():
    msg = zstd_problem(_plan(["zstd", "lz4"]), max_produce_version=6)
    assert msg is not None
    assert "Produce up to v6" in msg and "zstd needs v7 (Kafka 2.1 or newer)" in msg
    assert "logs.zstd would fail with UNSUPPORTED_COMPRESSION_TYPE" in msg
    assert "logs.lz4" not in msg


def test_no_problem_without_zstd_or_with_new_brokers():
    assert zstd_problem(_plan(["lz4", "gzip"]), max_produce_version=3) is None
    assert zstd_problem(_plan(["zstd"]), max_produce_version=7) is None
    assert zstd_problem(_plan(["zstd"]), max_produce_version=None) is None
