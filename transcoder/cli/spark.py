"""`transcoder spark ...`: what running on a Spark cluster needs besides `run --engine spark`."""

from __future__ import annotations

from pathlib import Path

import click

from transcoder.cli.main import main


@main.group()
def spark() -> None:
    """Running on a Spark cluster: shipping transcoder to the executors."""


@spark.command()
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), default=Path("transcoder-env.tar.gz"),
              show_default=True, help="The archive to write: .tar.gz, .tgz or .tar (uncompressed: fastest to make).")
@click.option("--python", "python", default=None,
              help="The Python the executors run, on their PATH or absolute [default: pythonX.Y of this driver].")
def pack(output: Path, python: str | None) -> None:
    """Pack transcoder, its compiled module and what they need (not pyspark: Spark ships its own) for
    spark.archives, and print the settings that make the executors use it (archive, path, Python)."""
    from transcoder.spark.pack import pack as write

    packed = write(output, python=python)
    size = packed.path.stat().st_size / 2**20
    click.echo(f"packed {len(packed.distributions)} distributions, {packed.files} files, {size:.1f} MiB into "
               f"{packed.path}; the executors run {packed.python} from their PATH")
    click.echo("add to the config (spark.conf), or pass to spark-submit as --conf:")
    for key, value in packed.settings().items():
        click.echo(f"  {key}: {value}")
