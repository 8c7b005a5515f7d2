"""A cluster's librdkafka properties as kafka-python's client arguments (security and TLS only), and how long the
raw client waits and backs off: the settings every connection of transcoder.kafka.protocol is opened with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: librdkafka property -> kafka-python KafkaAdminClient argument (security and TLS only).
_KAFKA_PYTHON_NAMES = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "client.id": "client_id",
}

#: kafka-python waits up to 30 s (doubling from 50 ms) before reconnecting to a broker it could not reach: after
#: an outage of a minute the batch producer stayed cut off for up to 30 s more. librdkafka's clients reconnect
#: within reconnect.backoff.max.ms (10 s); this one within a second.
RECONNECT_BACKOFF_MAX_MS = 1000
RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms

#: How old kafka-python's broker list (its ClusterMetadata) may grow before it asks again, unless the cluster config
#: sets metadata.max.age.ms: kafka-python's default is 300 s. The list also follows every Metadata answer of the
#: raw client's own (RawClient.leaders), and is asked again at once on a broker id it does not hold.
METADATA_MAX_AGE_MS = 30_000

#: A request gets this long beyond its own timeout for kafka-python to answer it (with the broker's response or
#: its own timeout error) before the caller gives up waiting on it: see RawClient._start.
ANSWER_MARGIN_S = 5.0


#: librdkafka properties that hold PEM text itself -> the kafka-python argument that takes a file of it.
_PEM_PROPERTIES = {"ssl.ca.pem": "ssl_cafile", "ssl.certificate.pem": "ssl_certfile", "ssl.key.pem": "ssl_keyfile"}


def _pem_file(text: str) -> str:
    """A private (0600) file holding `text`, removed when the process exits: kafka-python reads PEM from files."""
    import atexit
    import os
    import tempfile

    fd, path = tempfile.mkstemp(prefix="transcoder-", suffix=".pem")  # mode 0600
    with os.fdopen(fd, "w") as f:
        f.write(text)

    def remove() -> None:
        if os.path.exists(path):
            os.unlink(path)

    atexit.register(remove)
    return path


def kafka_python_config(librdkafka: Mapping[str, Any]) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": str(librdkafka["bootstrap.servers"]).split(",")}
    for k, v in librdkafka.items():
        if k in _KAFKA_PYTHON_NAMES:
            conf[_KAFKA_PYTHON_NAMES[k]] = (str(v).upper() if k.startswith("sasl.mech") or k == "security.protocol"
                                            else v)
        elif k in _PEM_PROPERTIES:
            conf[_PEM_PROPERTIES[k]] = _pem_file(str(v))
    if str(librdkafka.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        conf["ssl_check_hostname"] = False
    if conf.get("sasl_mechanism") == "OAUTHBEARER":  # librdkafka's unsecured JWT, as kafka-python's token provider
        from transcoder.kafka import oauthbearer

        conf["sasl_oauth_token_provider"] = oauthbearer.token_provider(oauthbearer.check_oauthbearer(librdkafka))
    return conf
