"""transcoder: copy Kafka topics into per-codec destination topics and measure each codec."""

__version__ = "0.1.0"


def versions() -> list[tuple[str, str]]:
    """(name, version) of transcoder, its compiled module and the Kafka clients it runs on, for `--version` and bug
    reports: transcoder, transcoder-native, confluent-kafka, librdkafka (the C library confluent-kafka wraps),
    kafka-python, and pyspark when it is installed (the [spark] extra). A distribution that is missing says so."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    out = [("transcoder", __version__), ("transcoder-native", installed("transcoder-native") or "not installed")]
    out.append(("confluent-kafka", installed("confluent-kafka") or "not installed"))
    try:
        from confluent_kafka import libversion
    except ImportError:
        pass
    else:
        out.append(("librdkafka", libversion()[0]))  # the one its wheel bundles (or the system's it was built on)
    out.append(("kafka-python", installed("kafka-python") or "not installed"))
    spark = installed("pyspark")  # by its metadata: importing pyspark takes a second
    if spark is not None:
        out.append(("pyspark", spark))
    return out
