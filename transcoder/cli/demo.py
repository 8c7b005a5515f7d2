"""`transcoder demo`: local broker, realistic data, one lane per codec, the measured comparison."""

from __future__ import annotations

import sys

import click

from transcoder.cli.main import ByteSize, main
from transcoder.cli.options import Choice
from transcoder.dev.datagen import KINDS


@main.command()
@click.option("--kind", "-k", type=Choice(KINDS), default="nginx", show_default=True,
              help="Built-in generator to seed the source topic with.")
@click.option("--bytes", "size", type=ByteSize(), default="250MB", show_default=True,
              help="Uncompressed bytes to seed.")
@click.option("--partitions", type=int, default=3, show_default=True,
              help="Partitions of the source topic it seeds.")
@click.option("--format", "fmt", type=Choice(["table", "markdown", "json"]), default="table",
              show_default=True, help="How the comparison is printed on stdout.")
@click.option("--engine", type=Choice(["service", "spark"]), default="service", show_default=True,
              help="Copy with the service, or with the Spark engine on local[*].")
def demo(kind: str, size: int, partitions: int, fmt: str, engine: str) -> None:
    """Start a local Kafka, seed realistic data, copy it into one topic per codec, print the comparison."""
    import json

    from rich.console import Console

    from transcoder.dev import demo as demo_mod
    from transcoder.report import tables as report

    err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    rows, lanes = demo_mod.run(kind=kind, size_bytes=size, partitions=partitions, state_dir=None, console=err,
                               engine=engine)
    if fmt == "markdown":
        click.echo(report.markdown(rows) + "\n\n" + report.status_markdown(lanes))
    elif fmt == "json":
        click.echo(json.dumps({"topics": json.loads(report.as_json(rows)),
                               "lanes": json.loads(report.as_json(lanes))}, indent=2))
    else:
        out = Console(width=None if sys.stdout.isatty() else 220)
        out.print(report.table(rows))
        out.print(report.status_table(lanes, title="transcoder report (the lanes, as `transcoder report` shows them)"))
