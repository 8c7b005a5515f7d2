"""Reading with Spark's Kafka source: the options that make it read what the service's consumer reads
(from `start`, read_committed, headers included), from the one config model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from transcoder.config import Config
from transcoder.errors import ConfigError

#: librdkafka properties whose Java-client name and meaning are the same; others are refused until translated.
_SAME_IN_JAVA = frozenset({"security.protocol", "sasl.mechanism", "client.rack"})


def cluster_options(config: Config) -> dict[str, str]:
    """The source cluster for Spark's Kafka source (`kafka.`-prefixed Java client properties)."""
    untranslated = sorted(k for k in config.cluster.config if k not in _SAME_IN_JAVA)
    if untranslated:
        raise ConfigError(f"cluster.config {untranslated[0]} is not yet translated for the Spark engine's Java client "
                          f"(it takes {', '.join(sorted(_SAME_IN_JAVA))}); use the service engine for this cluster")
    return {"kafka.bootstrap.servers": config.cluster.bootstrap_servers,
            **{f"kafka.{k}": str(v) for k, v in config.cluster.config.items()}}


def read_options(config: Config, topics: list[str]) -> dict[str, str]:
    """Options of `spark.readStream.format("kafka")` (and of a batch read) for these source topics."""
    opts: dict[str, Any] = {
        **cluster_options(config),
        "subscribe": ",".join(topics),
        "includeHeaders": "true",  # repeated names, order and null values are kept
        "kafka.isolation.level": "read_committed",  # aborted transactions are not copied, as in the service
        "failOnDataLoss": "true",  # records deleted before they were copied stop the copy, naming them
    }
    if isinstance(config.start, datetime):
        opts["startingTimestamp"] = str(int(config.start.timestamp() * 1000))
        opts["startingOffsetsByTimestampStrategy"] = "latest"  # a timestamp past the end starts at the end
    else:
        opts["startingOffsets"] = config.start
    if config.spark.max_offsets_per_trigger is not None:
        opts["maxOffsetsPerTrigger"] = str(config.spark.max_offsets_per_trigger)
    return opts
