"""The config model, its loading (YAML + TRANSCODER__* environment) and secret references.

May import: transcoder.codecs, transcoder.errors. Both engines read this one model.
"""

from transcoder.config.loading import ENV_PREFIX, load, parse, with_spark_master
from transcoder.config.model import (
    Batch,
    Cluster,
    Config,
    Destination,
    ErrorsConfig,
    MetricsConfig,
    MigrationConfig,
    Route,
)
from transcoder.config.secrets import SECRET_PROPERTIES
from transcoder.config.spark import SparkConfig

__all__ = ["ENV_PREFIX", "SECRET_PROPERTIES", "Batch", "Cluster", "Config", "Destination", "ErrorsConfig",
           "MetricsConfig", "MigrationConfig", "Route", "SparkConfig", "load", "parse", "with_spark_master"]
