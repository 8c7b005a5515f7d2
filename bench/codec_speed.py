"""The physical limit on this machine: each codec's own speed on the dataset's records, on one core.

    python -m bench.codec_speed [--kind nginx | --from-file FILE] [--records 300000] [--codecs none,gzip,...]
                                [--repeat 3]

The records are cut into 1 MiB uncompressed batches by the native Rebatcher, as a lane cuts them, and sealed (framed,
compressed, CRC) one batch at a time by transcoder_native.seal_sections, so one core works at a time: what any copier
that writes these batches spends at the least, per record, before it reads, sends or waits for anything. A codec may
carry a level (`gzip:5`); without one, the level Kafka's clients use by default. Prints a Markdown table: CPU seconds
per 1M records, records/s and uncompressed MB/s on one core, the bytes written and the ratio to uncompressed.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
import transcoder_native as native

from bench.copiers import codec_level
from bench.run import Dataset
from transcoder.codecs import CODECS
from transcoder.config import Batch
from transcoder.dev.datagen.stream import Record
from transcoder.errors import TranscoderError


def cut(tuples: list[tuple[Any, ...]]) -> list[Any]:
    """Records (key, value, headers, timestamp) cut into sections as a lane's Rebatcher cuts them at the default
    batch (1 MiB uncompressed, 100,000 records)."""
    if not tuples:
        return []
    batch = Batch()
    rb = native.Rebatcher(batch.max_bytes, batch.max_records)
    rb.add(native.decode_stored(native.encode_batch(tuples, codec="none"), 0), 0)
    return rb.take(flush=True)


def sections(records: Iterable[Record], count: int) -> tuple[list[Any], int]:
    """The first `count` records cut into sections (`cut`), and their record bytes (keys and values)."""
    tuples = [(r.key, r.value, [], r.timestamp_ms) for r in itertools.islice(records, count)]
    return cut(tuples), sum(len(k or b"") + len(v or b"") for k, v, _, _ in tuples)


def seal_cpu(secs: list[Any], codec: str, level: int | None) -> tuple[float, int]:
    """Process CPU seconds to seal every section once, one at a time, and the bytes sealed."""
    stamp = [(-1, -1, -1)]
    t = time.process_time()
    out = sum(len(native.seal_sections([s], stamp, codec=codec, level=level)[0]) for s in secs)
    return time.process_time() - t, out


@click.command()
@click.option("--kind", default="nginx", show_default=True, help="Built-in generator kind.")
@click.option("--from-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Your own data: one record per line (or NDJSON), as `transcoder seed --from-file` reads it.")
@click.option("--records", default=300_000, show_default=True, type=click.IntRange(min=1))
@click.option("--codecs", default=",".join(CODECS), show_default=True)
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(min=1),
              help="Each codec timed this many times: the fastest counts.")
def main(kind: str, from_file: Path | None, records: int, codecs: str, repeat: int) -> None:
    data = Dataset(name=from_file.stem if from_file else kind, kind=None if from_file else kind,
                   from_file=from_file, count=records)
    try:
        secs, raw = sections(data.records(), records)
    except TranscoderError as exc:  # an unknown kind, a file it cannot read
        raise click.ClickException(str(exc)) from None
    n = sum(len(s) for s in secs)
    if not n:
        raise click.ClickException(f"no records in {data.name}")
    click.echo(f"{n:,} {data.name} records, {raw / 1e6:,.1f} MB of keys and values, in {len(secs)} batches of "
               "1 MiB; each sealed alone, one core at a time; the fastest of "
               f"{repeat} passes.\n")
    click.echo("| codec | CPU s per 1M records | records/s, one core | MB/s, one core | bytes written | "
               "ratio to uncompressed |")
    click.echo("|---|---|---|---|---|---|")
    for spec in codecs.split(","):
        try:
            codec, level = codec_level(spec)
            cpu, out = min(seal_cpu(secs, codec, level) for _ in range(repeat))
        except ValueError as exc:  # an unknown codec, a level out of its range
            raise click.BadParameter(f"{spec}: {exc}", param_hint="--codecs") from None
        cpu = max(cpu, 1e-9)
        click.echo(f"| {spec} | {cpu * 1e6 / n:.2f} | {n / cpu:,.0f} | {raw / 1e6 / cpu:,.1f} | {out:,} | "
                   f"{raw / out:.2f}x |")


if __name__ == "__main__":
    main()
