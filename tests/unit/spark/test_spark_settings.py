"""The Spark engine's pure parts: its config section, session settings and Kafka source options."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from transcoder import config as cfg
from transcoder.errors import ConfigError
from transcoder.spark import session
from transcoder.spark.source import read_options


def conf(environ=None, **extra) -> cfg.Config:
    return cfg.parse({"cluster": {"bootstrap_servers": "k:9092"},
                      "routes": [{"source": "a", "destinations": [{"codec": "zstd"}]}], **extra},
                     environ=environ or {})


def test_spark_section_defaults_and_validation():
    s = conf().spark
    assert (s.master, s.checkpoint_location, s.trigger_interval_ms, s.max_offsets_per_trigger, s.conf) == (
        "local[*]", None, 0, None, {})
    for master in ("local", "local[4]", "spark://h:7077", "k8s://https://api:6443", "yarn"):
        assert conf(spark={"master": master}).spark.master == master
    with pytest.raises(ConfigError, match=r"spark.master: 'lokal\[2\]' is not a Spark master URL"):
        conf(spark={"master": "lokal[2]"})
    with pytest.raises(ConfigError, match=r"spark.conf: spark.jars.packages is set by transcoder itself"):
        conf(spark={"conf": {"spark.jars.packages": "x:y:1"}})
    with pytest.raises(ConfigError, match=r"spark.trigger_interval_ms"):
        conf(spark={"trigger_interval_ms": -1})
    with pytest.raises(ConfigError, match=r"spark.bogus"):
        conf(spark={"bogus": 1})


def test_session_settings_pin_the_connector_to_pyspark_and_stay_on_loopback(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    s = session.settings(conf(spark={"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": 4,
                                                                      "spark.ui.enabled": False}}).spark,
                         app_name="t", version="4.2.0")
    assert s["spark.jars.packages"] == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    assert s["spark.jars.ivy"] == str(tmp_path / "transcoder" / "ivy")
    settings_xml = (tmp_path / "transcoder" / "ivy" / "ivysettings.xml").read_text()
    assert s["spark.jars.ivySettings"] == str(tmp_path / "transcoder" / "ivy" / "ivysettings.xml")
    assert 'root="https://repo1.maven.org/maven2/"' in settings_xml and "spark-packages" not in settings_xml
    assert (s["spark.master"], s["spark.driver.host"], s["spark.driver.bindAddress"]) == (
        "local[2]", "127.0.0.1", "127.0.0.1")
    assert (s["spark.sql.shuffle.partitions"], s["spark.ui.enabled"]) == ("4", "false")
    remote = session.settings(conf(spark={"master": "spark://h:7077"}).spark, app_name="t", version="4.2.0")
    assert "spark.driver.host" not in remote


def test_pyspark_missing_is_one_line(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(session.metadata, "version", missing)
    with pytest.raises(ConfigError, match=r"^the Spark engine needs pyspark: pip install 'transcoder\[spark\]'$"):
        session.pyspark_version()


def test_read_options_follow_start_and_the_spark_section():
    o = read_options(conf(), ["a", "b"])
    assert o == {"kafka.bootstrap.servers": "k:9092", "subscribe": "a,b", "includeHeaders": "true",
                 "kafka.isolation.level": "read_committed", "failOnDataLoss": "true", "startingOffsets": "earliest"}
    o = read_options(conf(start="2026-01-01T00:00:00Z", spark={"max_offsets_per_trigger": 5000}), ["a"])
    start = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert (o["startingTimestamp"], o["startingOffsetsByTimestampStrategy"], o["maxOffsetsPerTrigger"]) == (
        str(start), "latest", "5000")
    assert "startingOffsets" not in o


def test_cluster_properties_are_translated_for_the_java_client_or_refused():
    c = conf(cluster={"bootstrap_servers": "k:9092", "config": {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "copier",
        "sasl.password": "${env:PW}", "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.endpoint.identification.algorithm": "none"}}, environ={"PW": 's3"c\\ret'})
    o = read_options(c, ["a"])
    assert o["kafka.security.protocol"] == "SASL_SSL" and o["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert o["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                           'username="copier" password="s3\\"c\\\\ret";')
    assert (o["kafka.ssl.truststore.type"], o["kafka.ssl.truststore.location"]) == ("PEM", "/etc/kafka/ca.pem")
    assert o["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert "kafka.sasl.password" not in o and "kafka.sasl.mechanisms" not in o
    with pytest.raises(ConfigError, match=r"cluster.config enable.ssl.certificate.verification is not yet translated"):
        read_options(conf(cluster={"bootstrap_servers": "k:9092", "config": {
            "enable.ssl.certificate.verification": "false"}}), ["a"])
    with pytest.raises(ConfigError, match=r"sasl.mechanism OAUTHBEARER: the Spark engine translates them for PLAIN"):
        read_options(conf(cluster={"bootstrap_servers": "k:9092", "config": {
            "sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.password": "${env:PW}"}},
            environ={"PW": "x"}), ["a"])
    settings = session.settings(conf().spark, app_name="t", version="4.2.0")
    assert "jaas" in settings["spark.sql.redaction.options.regex"]  # options in plans and the UI: redacted


CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _key(password: bytes | None) -> tuple[str, str]:
    """A fresh EC key as PKCS#8 PEM, encrypted with `password` (PBES2, as OpenSSL and cryptography write today)
    or not, and the same key unencrypted."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    plain = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc).decode(), plain


KEY, PLAIN_KEY = _key(b"kpw")


def test_a_client_certificate_and_key_become_a_pem_key_store_given_by_value(tmp_path):
    (tmp_path / "c.pem").write_text(CERT)
    (tmp_path / "k.pem").write_text(KEY)
    mtls = {"security.protocol": "SSL", "ssl.certificate.location": str(tmp_path / "c.pem"),
            "ssl.key.location": str(tmp_path / "k.pem"), "ssl.key.password": "${env:KP}"}
    o = read_options(conf(cluster={"bootstrap_servers": "k:9093", "config": mtls}, environ={"KP": "kpw"}), ["a"])
    # the encrypted key (PBES2, which Java 17's PEM key store cannot open) opened here with ssl.key.password
    assert KEY.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert {k: v for k, v in o.items() if k.startswith("kafka.ssl")} == {
        "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.certificate.chain": CERT,
        "kafka.ssl.keystore.key": PLAIN_KEY}
    plain, _ = _key(None)
    inline = {"ssl.certificate.pem": CERT, "ssl.key.pem": "${env:K}"}  # PEM text, the key by reference
    o = read_options(conf(cluster={"bootstrap_servers": "k:9093", "config": inline}, environ={"K": plain}), ["a"])
    assert (o["kafka.ssl.keystore.certificate.chain"], o["kafka.ssl.keystore.key"]) == (CERT, plain)
    settings = session.settings(conf().spark, app_name="t", version="4.2.0")
    assert re.search(settings["spark.sql.redaction.options.regex"], "kafka.ssl.keystore.key")  # hidden in plans


@pytest.mark.parametrize(("config", "message"), [
    ({"ssl.certificate.location": "/nonexistent/c.pem", "ssl.key.pem": "${env:K}"},
     r"^cluster.config ssl.certificate.location: cannot read /nonexistent/c.pem: No such file or directory$"),
    ({"ssl.certificate.pem": CERT}, r"a key its certificate: ssl.key.location or ssl.key.pem is not set$"),
    ({"ssl.certificate.pem": CERT, "ssl.key.pem": "${env:RSA}"},
     r"reads PKCS#8 keys only .*`openssl pkcs8 -topk8`$"),
    ({"ssl.certificate.pem": CERT, "ssl.key.pem": "${env:K}"},
     r"^cluster.config ssl.key: the key is encrypted and ssl.key.password is not set$"),
    ({"ssl.certificate.pem": CERT, "ssl.key.pem": "${env:K}", "ssl.key.password": "${env:WRONG}"},
     r"^cluster.config ssl.key.password does not open the key: "),
])
def test_a_client_certificate_or_key_the_java_client_cannot_take_is_one_line(config, message):
    with pytest.raises(ConfigError, match=message):
        read_options(conf(cluster={"bootstrap_servers": "k:9093", "config": config},
                          environ={"K": KEY, "WRONG": "nope", "RSA": "-----BEGIN RSA PRIVATE KEY-----\nx\n"}), ["a"])


def test_under_spark_submit_its_master_and_packages_stay(monkeypatch):
    s = session.settings(conf(spark={"master": "local[2]", "conf": {"spark.executor.memory": "2g"}}).spark,
                         app_name="t", version="4.2.0", submitted=True)
    assert not {"spark.master", "spark.jars.packages", "spark.jars.ivy", "spark.driver.host"} & set(s)
    assert s["spark.executor.memory"] == "2g" and s["spark.app.name"] == "t"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4242")
    assert session.under_spark_submit()
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    assert not session.under_spark_submit()


def test_master_option_overrides_the_config_and_is_validated():
    c = conf(spark={"master": "local[2]", "max_offsets_per_trigger": 10})
    assert cfg.with_spark_master(c, "spark://h:7077").spark.master == "spark://h:7077"
    assert cfg.with_spark_master(c, "local[1]").spark.max_offsets_per_trigger == 10
    with pytest.raises(ConfigError, match=r"^--master: master: 'nope' is not a Spark master URL"):
        cfg.with_spark_master(c, "nope")


def test_java_missing_is_one_line(monkeypatch):
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ConfigError, match=r"^the Spark engine needs Java 17 or newer: no `java` on the PATH"):
        session.build(conf().spark, connector_version="4.2.0")


def test_the_workers_python_follows_spark_pyspark_python_then_this_interpreter_on_a_local_master():
    import sys

    venv = "/opt/venv/bin/python"
    given = conf(spark={"master": "spark://h:7077", "conf": {"spark.pyspark.python": venv}}).spark
    # spark.pyspark.python wins over the environment, on any master, as spark-submit makes it win
    assert session.worker_python(given, submitted=False, environ={"PYSPARK_PYTHON": "python3"}) == venv
    assert session.worker_python(given, submitted=True, environ={}) == venv
    local = conf(spark={"master": "local[2]"}).spark
    assert session.worker_python(local, submitted=False, environ={}) == sys.executable
    assert session.worker_python(local, submitted=False, environ={"PYSPARK_PYTHON": "/x/python"}) is None
    assert session.worker_python(local, submitted=True, environ={}) is None
    assert session.worker_python(conf(spark={"master": "spark://h:7077"}).spark, submitted=False, environ={}) is None
