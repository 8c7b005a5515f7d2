"""Nothing the Spark engine makes Spark print carries a secret: the Kafka source's options in its query plan
(`kafka.sasl.jaas.config` holds the SASL password), the SparkSession's conf, Spark's own log lines."""

from __future__ import annotations

import secrets

from transcoder import config as cfg
from transcoder.spark import session
from transcoder.spark.source import read_options


def test_the_kafka_sources_plan_and_the_sessions_conf_hide_the_sasl_password(spark, capfd):
    password = f"pw-{secrets.token_hex(12)}"
    conf = cfg.parse({
        "cluster": {"bootstrap_servers": "127.0.0.1:1", "config": {  # explain plans only: nothing connects
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "transcoder",
            "sasl.password": "${env:SPARK_TEST_PASSWORD}"}},
        "group_id": "secrets-in-plans", "routes": [{"source": "src", "destinations": [{"codec": "zstd"}]}],
        "metrics": {"port": 0}}, environ={"SPARK_TEST_PASSWORD": password})
    options = read_options(conf, ["src"])
    assert password in options["kafka.sasl.jaas.config"]  # the option does carry it (the test can fail)

    frame = spark.readStream.format("kafka").options(**options).load()
    frame.explain(mode="extended")
    print("\n".join(f"{k}={v}" for k, v in spark.sparkContext.getConf().getAll()))
    out, err = capfd.readouterr()  # the plan, the conf, and whatever the JVM logged meanwhile (fd 1 and 2)
    for text in (out, err):
        assert password not in text
    assert "StreamingRelationV2" in out and "kafka.sasl.jaas.config=*********(redacted)" in out
    assert "kafka.sasl.mechanism=SCRAM-SHA-512" in out  # other options are shown as they are


def test_a_configs_own_redaction_pattern_widens_transcoders_never_narrows_it():
    spark_conf = cfg.SparkConfig(master="local[1]", conf={"spark.redaction.regex": "(?i)mykey",
                                                          "spark.sql.redaction.options.regex": "(?i)url"})
    got = session.settings(spark_conf, app_name="t", version="4.2.0")
    assert got["spark.redaction.regex"] == f"{session.REDACTION_REGEX}|(?:(?i)mykey)"
    assert got["spark.sql.redaction.options.regex"] == f"{session.OPTIONS_REDACTION_REGEX}|(?:(?i)url)"
    plain = session.settings(cfg.SparkConfig(master="local[1]"), app_name="t", version="4.2.0")
    assert plain["spark.redaction.regex"] == "(?i)secret|password|token|access[.]key|jaas"
    assert "jaas" in plain["spark.sql.redaction.options.regex"]
