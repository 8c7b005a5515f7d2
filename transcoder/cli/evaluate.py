"""`transcoder evaluate`: codec × level × batch size measured on a sample of the topic's own records."""

from __future__ import annotations

import dataclasses
import sys
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from transcoder.cli.main import ByteSize, bootstrap, main, properties
from transcoder.cli.options import TIME_FORMS, Choice, Partitions, Time, When, option, partition_list
from transcoder.dev.datagen import KINDS
from transcoder.engines import MEASURERS, MeasurerEntry, Measuring, choices_help
from transcoder.errors import ConfigError
from transcoder.evaluate.grid import default_codecs_text

if TYPE_CHECKING:
    from transcoder.evaluate.grid import Producer

FORMATS = ("table", "markdown", "json", "csv")
#: With --engine spark and --topic, the driver reads this many records of each partition (the topic's facts:
#: the codec producers use now, their batch size, the rate); the executors read the sample.
HEAD = 2_000


#: Records read from each partition of --topic when neither --records nor --since/--until is given.
DEFAULT_RECORDS = 50_000


def _records(records: int | None, since: When | None, until: When | None) -> int | None:
    return records if records is not None or since or until else DEFAULT_RECORDS


def _ms(when: When | None) -> int | None:
    return None if when is None else when.ms()


def _check_window(since: When | None, until: When | None) -> None:
    if since is not None and until is not None and until.ms() <= since.ms():
        raise ConfigError(f"--until {until} is not after --since {since}")


def _sizes(value: str | None) -> list[int] | None:
    if value is None:
        return None
    size = ByteSize()
    out = []
    for part in value.split(","):
        try:
            out.append(size.convert(part.strip(), None, None))
        except click.BadParameter:
            raise ConfigError(f"--batch-sizes: {part.strip()!r} is not a size (e.g. 64KiB, 1MiB)") from None
    return out


def _sample(topic: str | None, file: Path | None, kind: str | None, *, cluster: dict[str, Any] | None,
            partitions: list[int] | None, records: int | None, since: When | None, until: When | None,
            file_format: str, key_field: str | None, count: int, seed_value: int, keys: bool, headers: bool,
            partition_count: int) -> Any:
    from transcoder.evaluate import sample as sampling

    if sum(x is not None for x in (topic, file, kind)) != 1:
        raise ConfigError("give exactly one input: --topic, --file or --kind")
    if topic is not None:
        assert cluster is not None
        return sampling.read_topic(cluster, topic, partitions=partitions, records=_records(records, since, until),
                                   since=_ms(since), until=_ms(until))
    if count <= 0:
        raise ConfigError(f"--count must be positive, not {count}")
    from transcoder.dev import seed as seeding

    if file is not None:
        source = seeding.FileSource(file, fmt=file_format, key_field=key_field)
        # files carry no timestamps: the records get one, a millisecond apart (as a steady producer would)
        recs = [(r.key, r.value, r.headers, 1_767_225_600_000 + i) for i, r in enumerate(islice(source, count))]
        return sampling.from_records(f"file {file}", recs, partition_count)
    assert kind is not None  # exactly one input was given, and neither topic nor file
    gen = seeding.generated(kind, seed_value=seed_value, keys=keys, headers=headers, start_ms=1_767_225_600_000,
                            events_per_second=2000.0)
    return sampling.from_records(f"--kind {kind}",
                                 [(r.key, r.value, r.headers, r.timestamp_ms) for r in islice(gen, count)],
                                 partition_count)


@main.command()
@click.option("--topic", "-t", help="Topic to sample (per partition, in offset order).")
@click.option("--bootstrap-servers", "-b", envvar="TRANSCODER_BOOTSTRAP_SERVERS",
              help="Kafka bootstrap servers (default: the running local broker).")
@click.option("-X", "props", multiple=True, metavar="KEY=VALUE", help="Any librdkafka property (repeatable).")
@option("--partition", "partitions", type=Partitions(), multiple=True, callback=partition_list, metavar="N[,N...]",
        was=("--partitions",), help="A partition of --topic to read, e.g. 0 or 0,3 (repeatable; default: all).")
@click.option("--records", type=int, help="The last N records of each partition (default 50,000).")
@click.option("--since", type=Time(past=True), help=f"Records from this time on ({TIME_FORMS}).")
@click.option("--until", type=Time(), help=f"Records before this time ({TIME_FORMS}).")
@option("--file", "file", type=click.Path(path_type=Path), was=("-f",),
        help="A file or directory of files, one record per line or NDJSON (.gz read too).")
@option("--input-format", "file_format", default="auto", show_default=True, type=Choice(["auto", "lines", "ndjson"]),
        was=("--file-format",), help="How --file is read (auto: by suffix).")
@click.option("--key-field", help="NDJSON field whose value becomes the record key.")
@click.option("--kind", "-k", type=Choice(KINDS), help="Built-in generator of realistic records.")
@option("--count", type=int, default=100_000, show_default=True, was=("-n",),
        help="Records to take from --file or --kind.")
@click.option("--partition-count", type=int, default=1, show_default=True,
              help="Spread --file/--kind records over this many partitions (murmur2 of the key, as Java "
                   "producers do; unkeyed records round-robin).")
@click.option("--seed", "seed_value", type=int, default=0, show_default=True, help="Generator seed.")
@click.option("--keys/--no-keys", default=True, show_default=True, help="Generated records keyed.")
@click.option("--headers/--no-headers", default=False, show_default=True, help="Generated records with headers.")
@click.option("--codecs", "codec_specs", multiple=True, metavar="CODEC[:LEVELS]",
              help=f"A codec with its levels, e.g. zstd:1,3,19 (repeatable; default: {default_codecs_text()}).")
@click.option("--batch-sizes", help="Batch sizes (batch.size / max_bytes), e.g. 64KiB,1MiB "
                                    "(default 16KiB,64KiB,256KiB,1MiB,4MiB within max.message.bytes).")
@click.option("--max-records", type=int, default=100_000, show_default=True,
              help="Records per batch at most (batch.num.messages).")
@click.option("--producer", type=Choice(["librdkafka", "java", "both"]), default="librdkafka", show_default=True,
              help="Whose batching rule cuts batches: librdkafka's (transcoder, most non-Java clients: batch.size "
                   "counts record bytes) or the Java producer's (MirrorMaker 2: batch.size counts estimated "
                   "compressed bytes), or both side by side.")
@click.option("--max-message-bytes", type=ByteSize(),
              help="The destination's max.message.bytes (default: the sampled topic's).")
@click.option("--repeats", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Timed repeats per cell (the median is reported).")
@click.option("--engine", type=Choice(list(MEASURERS), was={"local": "service"}), default=next(iter(MEASURERS)),
              show_default=True,
              help=choices_help(MEASURERS))
@click.option("--master", default="local[*]", show_default=True, help="Spark master for --engine spark.")
@click.option("--rate", type=float, help="Records/s the topic receives (default: read from the sampled topic).")
@click.option("--retention-ms", type=int, help="The topic's retention.ms (default: the sampled topic's, else 7 days).")
@click.option("--replication-factor", type=int, help="Copies of each partition (default: the topic's, else 3).")
@click.option("--fanout", type=int, default=1, show_default=True, help="Consumer groups reading the topic.")
@click.option("--cpu-budget", type=float, help="Cores for compression on producers, brokers and consumers.")
@click.option("--min-ratio", type=float, help="The least compression ratio to accept.")
@click.option("--current", "current_spec", metavar="CODEC[:LEVEL]",
              help="The codec producers use now (default: the codec of the topic's stored batches).")
@click.option("--current-batch-size", type=ByteSize(),
              help="The batch size producers use now (default: estimated from the topic's stored batches).")
@click.option("--format", "fmt", type=Choice(FORMATS), default="table", show_default=True,
              help="How the results are printed on stdout.")
@click.option("--html", "html_dir", type=click.Path(path_type=Path), help="Also write an HTML report with plots here.")
@click.option("--local-kafka-dir", type=click.Path(path_type=Path), envvar="TRANSCODER_LOCAL_KAFKA_DIR",
              hidden=True, help="State dir of the local broker to use when no bootstrap is given.")
def evaluate(topic: str | None, bootstrap_servers: str | None, props: tuple[str, ...], partitions: list[int] | None,
             records: int | None, since: When | None, until: When | None, file: Path | None, file_format: str,
             key_field: str | None, kind: str | None, count: int, partition_count: int, seed_value: int, keys: bool,
             headers: bool,
             codec_specs: tuple[str, ...], batch_sizes: str | None, max_records: int, producer: str,
             max_message_bytes: int | None,
             repeats: int, engine: str, master: str, rate: float | None, retention_ms: int | None,
             replication_factor: int | None, fanout: int, cpu_budget: float | None, min_ratio: float | None,
             current_spec: str | None, current_batch_size: int | None, fmt: str, html_dir: Path | None,
             local_kafka_dir: Path | None) -> None:
    """Measure codec x level x batch size on a sample of records, framed as Kafka stores them, and recommend one."""
    from transcoder.evaluate import grid, recommend, render

    chosen = grid.settings(codec_specs or grid.DEFAULT_CODECS)
    _check_window(since, until)
    if max_records <= 0:
        raise ConfigError(f"--max-records must be positive, not {max_records}")
    if html_dir is not None:  # refused now, not after the whole grid was measured
        from transcoder.evaluate.html import check_directory

        check_directory(html_dir)
    cluster = None
    if topic is not None:
        cluster = {"bootstrap.servers": bootstrap(bootstrap_servers, local_kafka_dir), **properties(props)}
    measurer = MEASURERS[engine]
    how = Measuring(repeats=repeats, max_records=max_records, master=master)
    plan = None
    if topic is not None and measurer.measure_topic is not None:  # its workers read the sample; here, its heads
        from transcoder.evaluate import sample as sampling

        assert cluster is not None
        plan = sampling.plan_topic(cluster, topic, partitions=partitions, records=_records(records, since, until),
                                   since=_ms(since), until=_ms(until))
        sample = sampling.read_ranges(plan, {p: (s, min(e, s + HEAD)) for p, (s, e) in plan.ranges.items()})
        sample.check_not_empty()
        sample.topic = sampling.facts(plan, sample)
    else:
        sample = _sample(topic, file, kind, cluster=cluster, partitions=partitions, records=records, since=since,
                         until=until, file_format=file_format, key_field=key_field, count=count,
                         seed_value=seed_value, keys=keys, headers=headers, partition_count=partition_count)
        sample.check_not_empty()
    facts = sample.topic
    limit = max_message_bytes or (facts.max_message_bytes if facts else None)
    sizes = grid.batch_sizes(_sizes(batch_sizes) or grid.DEFAULT_BATCH_SIZES, max_message_bytes=limit,
                             explicit=batch_sizes is not None)
    rules: tuple[Producer, ...] = ("librdkafka", "java") if producer == "both" else (cast("Producer", producer),)
    cells = grid.grid(chosen, sizes, rules)
    current = _current(current_spec, current_batch_size, facts, sizes)
    if current is not None and current not in cells:
        cells.append(current)
    workload = recommend.Workload(
        rate=rate if rate is not None else (facts.rate if facts else None),
        retention_ms=retention_ms if retention_ms is not None else (facts.retention_ms if facts else 7 * 86_400_000),
        replication_factor=replication_factor or (facts.replication_factor if facts else 3),
        fanout=fanout, cpu_budget=cpu_budget, min_ratio=min_ratio)
    workload.check()

    if plan is not None and measurer.measure_topic is not None:
        results = measurer.measure_topic(plan, cells, how)
        sample.offsets = {p: (s, e - 1) for p, (s, e) in plan.ranges.items()}
    else:
        results = _measure(measurer, how, sample, cells)
    by_cell = dict(zip(cells, results, strict=True))
    limits = recommend.Limits.of((r for rs in sample.partitions.values() for r in rs), limit)
    advice = recommend.recommend(results, workload, current=by_cell.get(current) if current else None,
                                 limits=limits)
    rec = advice.as_dict(workload)
    n_records, n_bytes = results[0].records, results[0].record_bytes  # every cell measures the whole sample
    title = (f"transcoder evaluate: {sample.description}, {n_records:,} records in {len(sample.partitions)} "
             f"partition(s), {n_bytes / 1e6:,.1f} MB")
    sample_info = {"source": sample.description, "records": n_records, "record_bytes": n_bytes,
                   "partitions": {str(p): list(o) for p, o in sample.offsets.items()} or sorted(sample.partitions),
                   "engine": engine, "repeats": repeats, "max_records": max_records, "producer": producer,
                   "topic": None if facts is None else facts.__dict__}
    if fmt == "json":
        click.echo(render.as_json(results, rec, sample_info))
    elif fmt == "csv":
        click.echo(render.as_csv(results), nl=False)
    elif fmt == "markdown":
        click.echo(render.markdown(results, rec))
    else:
        from rich.console import Console

        console = Console(width=None if sys.stdout.isatty() else 200)
        console.print(render.table(results, title, rec))
        console.print(advice.text)
    if html_dir is not None:
        from transcoder.evaluate.html import write_report

        try:
            written = write_report(html_dir, results, title=title, summary_lines=advice.text.splitlines(),
                                   recommendation=rec)
        except OSError as exc:  # checked before the work began; the disk may have filled since
            raise ConfigError(f"--html {html_dir}: cannot write the report: {exc.strerror or exc}") from None
        click.echo(f"wrote {', '.join(str(p) for p in written)}", err=True)


def _current(spec: str | None, batch: int | None, facts: Any, sizes: list[int]) -> Any:
    """The cell producers write today: --current, else the codec of the topic's stored batches."""
    from transcoder.evaluate import grid

    if spec is not None:
        settings = grid.parse_codec(spec, option="--current")
        if len(settings) != 1:
            raise ConfigError(f"--current {spec!r}: give one codec and at most one level")
        setting = settings[0]
    elif facts is not None and facts.current_codec is not None:
        setting = grid.Setting(facts.current_codec, None)
    elif batch is not None:
        raise ConfigError("--current-batch-size needs --current (or a topic to read the codec from)")
    else:
        return None
    size = batch or (facts.current_batch_bytes if facts is not None else None) or sizes[0]
    return grid.Cell(setting, size)


def _measure(measurer: MeasurerEntry, how: Measuring, sample: Any, cells: list[Any]) -> list[Any]:
    """The grid measured on the sample by the chosen engine, with a progress bar on a terminal if it reports one."""
    if not measurer.reports_progress:
        return measurer.measure(sample.partitions, cells, how)
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

    from transcoder.cli.progress import bars

    with bars(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TextColumn("cells measured"),
              TimeRemainingColumn()) as bar:
        task = bar.add_task("evaluate", total=len(cells) * len(sample.partitions))
        return measurer.measure(sample.partitions, cells,
                                dataclasses.replace(how, progress=lambda: bar.advance(task)))
