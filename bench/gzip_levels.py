"""gzip as transcoder writes it (libdeflate, native/) against zlib (what librdkafka and the Java client write), level by
level, on 1 MiB batches of the generated datasets: sizes and CPU.

`python -m bench.gzip_levels [--records N] [--kinds nginx,json-logs,...] [--repeat R]` prints a Markdown table.
Kafka's gzip levels are zlib's; transcoder maps each to a libdeflate level (native `deflate_level`) and this shows
what that gives: the size ratio (zlib bytes / transcoder bytes, >= 1 means no larger) and the CPU ratio.
"""

from __future__ import annotations

import itertools
import time
import zlib

import click
import transcoder_native as native

from bench.codec_speed import cut
from transcoder.dev import seed


def sections(kind: str, records: int) -> tuple[list, list[bytes]]:
    recs = list(itertools.islice(seed.generated(kind, seed_value=1, keys=True, headers=False,
                                                start_ms=1_700_000_000_000, events_per_second=2000.0), records))
    tuples = [(r.key, r.value, [], r.timestamp_ms) for r in recs]
    secs = cut(tuples)
    return secs, [native.records_section([tuples[o] for o in s.offsets]) for s in secs]


def gzip_zlib(data: bytes, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)  # a gzip member, as librdkafka writes
    return c.compress(data) + c.flush()


@click.command()
@click.option("--records", default=30_000, show_default=True)
@click.option("--kinds", default="nginx,json-logs,metrics,entities", show_default=True)
@click.option("--repeat", default=3, show_default=True, help="each compression timed this many times, summed")
def main(records: int, kinds: str, repeat: int) -> None:
    click.echo("| data | level | zlib bytes | transcoder bytes | size, zlib / transcoder | CPU, transcoder / zlib |")
    click.echo("|---|---|---|---|---|---|")
    for kind in kinds.split(","):
        secs, raw = sections(kind, records)
        for level in range(1, 10):
            zt = nt = 0.0
            for _ in range(repeat):
                t = time.process_time()
                zbytes = sum(len(gzip_zlib(r, level)) for r in raw)
                zt += time.process_time() - t
                t = time.process_time()
                nbytes = sum(len(b) - native.BATCH_OVERHEAD for b in native.seal_sections(
                    secs, [(-1, -1, -1)] * len(secs), codec="gzip", level=level))
                nt += time.process_time() - t
            click.echo(f"| {kind} | {level} | {zbytes:,} | {nbytes:,} | {zbytes / nbytes:.4f} | {nt / zt:.2f}x |")


if __name__ == "__main__":
    main()
