"""`transcoder seed`: write realistic records into a topic, from files or built-in generators."""

from __future__ import annotations

import time
from pathlib import Path

import click

from transcoder.cli.main import ByteSize, bootstrap, main, properties
from transcoder.cli.options import TIME_FORMS, Choice, Time, When, option
from transcoder.codecs import CODECS
from transcoder.dev.datagen import KINDS
from transcoder.errors import ConfigError


@main.command()
@click.option("--topic", "-t", required=True, help="Topic to write; created when missing.")
@click.option("--bootstrap-servers", "-b", envvar="TRANSCODER_BOOTSTRAP_SERVERS",
              help="Kafka bootstrap servers (default: the running local broker).")
@click.option("-X", "props", multiple=True, metavar="KEY=VALUE",
              help="Any librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable).")
@click.option("--kind", "-k", type=Choice(KINDS), help="Built-in generator of realistic records.")
@option("--file", "file", type=click.Path(path_type=Path), was=("-f",),
        help="A file or a directory of files; one record per line, or NDJSON (.gz read too).")
@option("--input-format", "fmt", default="auto", show_default=True, was=("--format",),
        type=Choice(["auto", "lines", "ndjson"]), help="How --file is read (auto: by suffix).")
@click.option("--key-field", help="NDJSON field whose value becomes the record key.")
@option("--count", type=int, was=("-n",), help="Records to write.")
@click.option("--bytes", "max_bytes", type=ByteSize(), help="Uncompressed bytes to write, e.g. 250MB.")
@option("--partitions", type=int, was=("-p",),
        help="Partitions when creating the topic (existing topics must match).")
@click.option("--replication-factor", type=int, default=-1, show_default=True, help="-1: the broker default.")
@click.option("--topic-config", "topic_props", multiple=True, metavar="KEY=VALUE",
              help="Topic config when creating it, e.g. cleanup.policy=compact (repeatable).")
@click.option("--keys/--no-keys", default=True, show_default=True, help="Key records (entities are always keyed).")
@click.option("--headers/--no-headers", default=False, show_default=True, help="Add realistic headers.")
@click.option("--rate", type=float, help="Records per second at most (default: as fast as possible).")
@click.option("--seed", "seed_value", type=int, default=0, show_default=True, help="Generator seed.")
@click.option("--start", type=Time(), help=f"Generator timeline start ({TIME_FORMS}; default: so that it ends "
                                          "about now).")
@click.option("--compression", default="none", show_default=True,
              type=Choice(CODECS), help="Codec for the seeding producer.")
@click.option("--local-kafka-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              hidden=True, help="State dir of the local broker to use when no bootstrap is given.")
def seed(topic: str, bootstrap_servers: str | None, props: tuple[str, ...], kind: str | None,
         file: Path | None, fmt: str, key_field: str | None, count: int | None, max_bytes: int | None,
         partitions: int | None, replication_factor: int, topic_props: tuple[str, ...], keys: bool,
         headers: bool, rate: float | None, seed_value: int, start: When | None, compression: str,
         local_kafka_dir: Path | None) -> None:
    """Write realistic records into a topic, from files or a built-in generator."""
    from transcoder.dev import seed as seeding

    if (kind is None) == (file is None):
        raise ConfigError("give exactly one of --kind or --file")
    if count is not None and max_bytes is not None:
        raise ConfigError("give --count or --bytes, not both")
    if kind is not None and count is None and max_bytes is None:
        raise ConfigError("a generator is endless: give --count or --bytes")
    for name, v in (("--count", count), ("--bytes", max_bytes), ("--partitions", partitions), ("--rate", rate)):
        if v is not None and v <= 0:
            raise ConfigError(f"{name} must be positive, not {v}")
    topic_config = properties(topic_props)
    where = lambda: ""  # noqa: E731
    if file is not None:
        source = seeding.FileSource(file, fmt=fmt, key_field=key_field)
        records = iter(source)
        where = lambda: source.where  # noqa: E731
    else:
        assert kind is not None  # exactly one of --kind and --file, checked above
        eps = rate or 2000.0
        start_ms = None if start is None else start.ms()
        if start_ms is None:
            start_ms = seeding.generator_start_ms(count, max_bytes, eps, int(time.time() * 1000))
        records = seeding.generated(kind, seed_value=seed_value, keys=keys, headers=headers,
                                    start_ms=start_ms, events_per_second=eps)
        # a --start in the past: a topic created here keeps what is seeded (a given retention.ms wins)
        keep = seeding.retention_for(start_ms, int(time.time() * 1000))
        if keep is not None:
            topic_config.setdefault("retention.ms", keep)
        if kind == "entities":
            topic_config.setdefault("cleanup.policy", "compact")
    cluster = {"bootstrap.servers": bootstrap(bootstrap_servers, local_kafka_dir), **properties(props)}

    from transcoder.cli.progress import SeedBar

    with SeedBar(topic, count, max_bytes) as progress:  # drawn on a terminal only
        result = seeding.seed(records, cluster=cluster, topic=topic, count=count, max_bytes=max_bytes,
                              partitions=partitions, replication_factor=replication_factor,
                              topic_config=topic_config, compression=compression, rate=rate,
                              where=where, progress=progress)
    click.echo(result.summary())
