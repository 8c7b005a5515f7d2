"""Reading with Spark's Kafka source: the options that make it read what the service's consumer reads
(from `start`, read_committed, headers included), from the one config model."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from transcoder.config import Config
from transcoder.errors import ConfigError

#: librdkafka properties whose Java-client name and meaning are the same.
_SAME_IN_JAVA = frozenset({"security.protocol", "sasl.mechanism", "client.rack",
                           "ssl.endpoint.identification.algorithm"})
#: librdkafka properties translated for the Java client below; others are refused, named.
_TRANSLATED = frozenset({"sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location"})
#: The Java login module of each SASL mechanism that takes a username and password.
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_properties(librdkafka: Mapping[str, Any]) -> dict[str, str]:
    """The Java client's properties for a cluster given as librdkafka properties (secrets revealed: never log).

    Translated: SASL username and password (PLAIN, SCRAM-SHA-256/512) into `sasl.jaas.config`; a PEM CA
    file into a PEM trust store; `ssl.endpoint.identification.algorithm=none` into Java's empty value.
    ConfigError, naming the property, for what has no translation yet (client certificates, OAUTHBEARER,
    Kerberos, librdkafka-only tuning).
    """
    conf = {k: v for k, v in librdkafka.items() if k != "bootstrap.servers"}
    untranslated = sorted(k for k in conf if k not in _SAME_IN_JAVA | _TRANSLATED)
    if untranslated:
        raise ConfigError(f"cluster.config {untranslated[0]} is not yet translated for the Spark engine's Java client "
                          f"(it takes {', '.join(sorted(_SAME_IN_JAVA | _TRANSLATED))}); use the service engine "
                          "for this cluster")
    out = {k: str(v) for k, v in conf.items() if k in _SAME_IN_JAVA}
    mechanism = str(conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "GSSAPI"))).upper()
    if "sasl.mechanisms" in conf:
        out["sasl.mechanism"] = mechanism
    if "sasl.username" in conf or "sasl.password" in conf:
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise ConfigError(f"cluster.config sasl.username/sasl.password with sasl.mechanism {mechanism}: the Spark "
                              f"engine translates them for {', '.join(_LOGIN_MODULES)} only")
        out["sasl.jaas.config"] = (f"{module} required username={_jaas_quoted(str(conf.get('sasl.username', '')))} "
                                   f"password={_jaas_quoted(str(conf.get('sasl.password', '')))};")
    if "ssl.ca.location" in conf:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(conf["ssl.ca.location"])
    if out.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""
    return out


def cluster_options(config: Config) -> dict[str, str]:
    """The source cluster for Spark's Kafka source (`kafka.`-prefixed Java client properties)."""
    return {"kafka.bootstrap.servers": config.cluster.bootstrap_servers,
            **{f"kafka.{k}": v for k, v in java_client_properties(config.cluster.librdkafka()).items()}}


def read_options(config: Config, topics: list[str]) -> dict[str, str]:
    """Options of `spark.readStream.format("kafka")` (and of a batch read) for these source topics."""
    opts: dict[str, Any] = {
        **cluster_options(config),
        "subscribe": ",".join(topics),
        "includeHeaders": "true",  # repeated names, order and null values are kept
        "kafka.isolation.level": "read_committed",  # aborted transactions are not copied, as in the service
        # on_source_loss: records deleted before they were copied stop the copy, naming them (stop), or Spark logs
        # them and reads on (continue); the service's counter and offset-map gap are not there on this engine
        "failOnDataLoss": "true" if config.on_source_loss == "stop" else "false",
    }
    if isinstance(config.start, datetime):
        opts["startingTimestamp"] = str(int(config.start.timestamp() * 1000))
        opts["startingOffsetsByTimestampStrategy"] = "latest"  # a timestamp past the end starts at the end
    else:
        opts["startingOffsets"] = config.start
    if config.spark.max_offsets_per_trigger is not None:
        opts["maxOffsetsPerTrigger"] = str(config.spark.max_offsets_per_trigger)
    return opts
