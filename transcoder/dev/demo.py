"""`transcoder demo`: a local broker, realistic data, one lane per codec, and the measured comparison."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.console import Console

from transcoder import config
from transcoder.codecs import CODECS
from transcoder.dev import seed
from transcoder.dev.local_kafka import LocalKafka
from transcoder.kafka.admin import describe, end_offsets
from transcoder.kafka.clients import connect_admin
from transcoder.kafka.protocol import RawClient
from transcoder.report import tables as report
from transcoder.service.runner import Service

SOURCE = "demo.nginx"


def measure(bootstrap: str, codec_of: dict[str, str]) -> dict[str, report.TopicFigures]:
    """Records (end - start offsets) and on-disk bytes (DescribeLogDirs) of each topic, from the broker."""
    admin, _ = connect_admin({"bootstrap.servers": bootstrap})
    shapes = {t: describe(admin, t) for t in codec_of}
    offsets = end_offsets(admin, {t: s for t, s in shapes.items() if s is not None})
    info = RawClient({"bootstrap.servers": bootstrap})
    try:
        sizes = info.topic_sizes(codec_of)
    finally:
        info.close()
    records = {t: 0 for t in codec_of}
    for (t, _), (low, high) in offsets.items():
        records[t] += high - low
    return {t: report.TopicFigures(topic=t, codec=c, records=records[t], disk_bytes=sizes[t])
            for t, c in codec_of.items()}


def demo_config(bootstrap: str) -> config.Config:
    return config.parse({
        "cluster": {"bootstrap_servers": bootstrap},
        "group_id": "transcoder-demo",
        "routes": [{"source": SOURCE, "destinations": [{"codec": c} for c in CODECS]}],
        "metrics": {"port": 0, "stats_interval_ms": 1000, "disk_interval_s": 5},
    }, source="demo", environ={})


def run(*, kind: str, size_bytes: int, partitions: int, state_dir: Path | None,
        console: Console, engine: str = "service") -> tuple[list[report.Row], list[report.DestinationRow]]:
    with tempfile.TemporaryDirectory(prefix="transcoder-demo-") as tmp:
        local = LocalKafka(state_dir or Path(tmp) / "kafka")
        console.print("[bold]1/4[/] starting a local Kafka broker (KRaft, from Maven Central jars)")
        st = local.up()
        try:
            console.print(f"     broker at {st.bootstrap}, data in {st.data_dir}")
            console.print(f"[bold]2/4[/] seeding {size_bytes / 1e6:,.0f} MB of {kind} records into {SOURCE} "
                          f"({partitions} partitions, uncompressed)")
            cluster = {"bootstrap.servers": st.bootstrap}
            records = seed.generated(kind, seed_value=1, keys=True, headers=False,
                                     start_ms=seed.generator_start_ms(None, size_bytes, 2000.0,
                                                                      int(time.time() * 1000)),
                                     events_per_second=2000.0)
            seeded = seed.seed(records, cluster=cluster, topic=SOURCE, max_bytes=size_bytes, partitions=partitions)
            console.print(f"     {seeded.summary()}")

            conf = demo_config(st.bootstrap)
            on = "the service" if engine == "service" else "Spark (local[*]; its start-up is part of the time)"
            console.print(f"[bold]3/4[/] copying through {len(CODECS)} isolated lanes, one per codec, on {on} "
                          "(--until-caught-up)")
            t0 = time.monotonic()
            if engine == "spark":
                from transcoder.spark.engine import SparkEngine

                spark_conf = conf.spark.model_copy(update={"checkpoint_location": str(Path(tmp) / "checkpoints")})
                service: Service | SparkEngine = SparkEngine(conf.model_copy(update={"spark": spark_conf}))
            else:
                service = Service(conf)
            prepared = service.run(until_caught_up=True)
            console.print(f"     {len(CODECS)} × {seeded.records:,} records copied in {time.monotonic() - t0:,.1f}s")

            console.print("[bold]4/4[/] measuring the topics on the broker (offsets, DescribeLogDirs)")
            codec_of = {SOURCE: "source (none)"} | {d.topic: d.codec for d in prepared.provision.destinations}
            figures = measure(st.bootstrap, codec_of)
            dests = [figures[d.topic] for d in prepared.provision.destinations]
            return (report.comparison(figures[SOURCE], dests, uncompressed_bytes=seeded.bytes),
                    report.from_status(service.status()))
        finally:
            local.down()
