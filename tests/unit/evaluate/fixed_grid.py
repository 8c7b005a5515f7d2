"""A fixed grid of measured cells (figures chosen by hand) for the recommendation, cost and output tests."""

from __future__ import annotations

from transcoder.evaluate.measure import CellResult

M = 1_000_000
UNCOMPRESSED = 250 * M  # 1M records of about 250 B, framed


def cell(codec: str, level: int | None, batch: int, ratio: float, compress_s: float, decompress_s: float) -> CellResult:
    return CellResult(codec=codec, level=level, batch_bytes=batch, batches=UNCOMPRESSED // batch, records=M,
                      record_bytes=230 * M, uncompressed_bytes=UNCOMPRESSED,
                      compressed_bytes=round(UNCOMPRESSED / ratio), compress_cpu_s=compress_s,
                      decompress_cpu_s=decompress_s)


NONE = cell("none", None, 1 << 20, 1.0, 0.0, 0.0)
LZ4_16K = cell("lz4", None, 16384, 3.5, 0.5, 0.15)
LZ4 = cell("lz4", None, 1 << 20, 4.5, 0.4, 0.12)
ZSTD3 = cell("zstd", 3, 1 << 20, 8.0, 0.9, 0.3)
GZIP6 = cell("gzip", 6, 1 << 20, 7.9, 5.0, 0.6)
ZSTD19 = cell("zstd", 19, 1 << 20, 11.0, 190.0, 0.25)
GRID = [NONE, LZ4_16K, LZ4, ZSTD3, GZIP6, ZSTD19]
