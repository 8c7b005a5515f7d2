"""Reading with Spark's Kafka source: the options that make it read what the service's consumer reads
(from `start`, read_committed, headers included), from the one config model."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from transcoder.config import Config
from transcoder.errors import ConfigError

#: librdkafka properties whose Java-client name and meaning are the same.
_SAME_IN_JAVA = frozenset({"security.protocol", "sasl.mechanism", "client.rack",
                           "ssl.endpoint.identification.algorithm"})
#: librdkafka properties translated for the Java client below; others are refused, named.
_TRANSLATED = frozenset({"sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location",
                         "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem",
                         "ssl.key.password"})
#: PEM private keys the Java client reads (PKCS#8, encrypted or not)
_PKCS8 = ("-----BEGIN PRIVATE KEY-----", "-----BEGIN ENCRYPTED PRIVATE KEY-----")
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
    file into a PEM trust store; a client certificate and key (mTLS: files or PEM text, the key PKCS#8, encrypted
    with `ssl.key.password` or not: decrypted here, see _decrypted) into a PEM key store given by value
    (`ssl.keystore.certificate.chain`, `ssl.keystore.key`: the executors need no file of it);
    `ssl.endpoint.identification.algorithm=none` into Java's empty value. ConfigError, naming the property, for
    what has no translation yet (OAUTHBEARER, Kerberos, librdkafka-only tuning).
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
    out.update(_key_store(conf))
    if out.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""
    return out


def _pem(conf: Mapping[str, Any], location: str, text: str) -> str | None:
    """A PEM given as a file (`location`) or as text; ConfigError naming the property when the file cannot be read."""
    if text in conf:
        return str(conf[text])
    if location not in conf:
        return None
    try:
        return Path(str(conf[location])).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cluster.config {location}: cannot read {conf[location]}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


def _key_store(conf: Mapping[str, Any]) -> dict[str, str]:
    """The client certificate and key (mTLS) as the Java client's PEM key store, by value."""
    chain, key = _pem(conf, "ssl.certificate.location", "ssl.certificate.pem"), _pem(
        conf, "ssl.key.location", "ssl.key.pem")
    if chain is None and key is None:
        if "ssl.key.password" in conf:
            raise ConfigError("cluster.config ssl.key.password without a key (ssl.key.location or ssl.key.pem)")
        return {}
    if chain is None or key is None:
        missing = "ssl.certificate.location or ssl.certificate.pem" if chain is None else \
            "ssl.key.location or ssl.key.pem"
        raise ConfigError(f"cluster.config: a client certificate needs its key and a key its certificate: {missing} "
                          "is not set")
    if not key.lstrip().startswith(_PKCS8):
        raise ConfigError("cluster.config ssl.key: the Spark engine's Java client reads PKCS#8 keys only (BEGIN "
                          "PRIVATE KEY or BEGIN ENCRYPTED PRIVATE KEY); convert it with `openssl pkcs8 -topk8`")
    if key.lstrip().startswith(_PKCS8[1]):
        key = _decrypted(key, conf.get("ssl.key.password"))
    return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}


def _decrypted(key: str, password: Any) -> str:
    """An encrypted PKCS#8 key as plain PKCS#8 PEM: Java 17's PEM key store cannot read PBES2 (what OpenSSL and
    cryptography write today: `SecretKeyFactory` has no "PBES2"), so the key is decrypted here, with the config's
    `ssl.key.password`, and travels like the password would (to the executors, hidden in plans as a `keystore`
    option)."""
    from cryptography.hazmat.primitives import serialization

    if password is None:
        raise ConfigError("cluster.config ssl.key: the key is encrypted and ssl.key.password is not set")
    try:
        private = serialization.load_pem_private_key(key.encode(), str(password).encode())
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cluster.config ssl.key.password does not open the key: {exc}") from None
    return private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode()


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
