"""Measuring cells on a partition, and folding partitions: exact sizes, CPU per repeat, medians."""

from __future__ import annotations

import pytest

from transcoder.codecs import BATCH_OVERHEAD, compress, decompress, encode_batch, records_section
from transcoder.evaluate import measure
from transcoder.evaluate.batches import cut
from transcoder.evaluate.grid import Cell, Setting, grid, settings
from transcoder.evaluate.measure import Partial, fold, measure_partition, measure_sample

LOGS = [(f"host-{i % 7}".encode() if i % 9 else None, f'10.0.0.{i % 50} - - "GET /api/items/{i % 300}"'.encode()
         if i % 13 else None, (("trace", b"ab"), ("tag", None)) if i % 4 == 0 else (), 1_700_000_000_000 + 3 * i)
        for i in range(3000)]
CELLS = grid(settings(["none", "gzip:1", "snappy", "lz4", "zstd:3,19"]), [4096, 65536])


def test_every_cell_is_the_sum_of_its_framed_batches_and_its_payloads_decompress_to_the_records():
    out = measure_partition(LOGS, CELLS, repeats=2)
    assert [(p.codec, p.level, p.batch_bytes) for p in out] == [
        (c.setting.codec, c.setting.level, c.batch_bytes) for c in CELLS]
    for p, c in zip(out, CELLS, strict=True):
        batches = cut(LOGS, max_bytes=c.batch_bytes)
        assert p.batches == len(batches) and p.records == len(LOGS)
        assert p.uncompressed_bytes == sum(len(encode_batch(b)) for b in batches)
        # the payloads as the destination's producer compresses them (librdkafka's zlib for gzip; transcoder's own
        # batches use libdeflate), framed
        assert p.compressed_bytes == sum(BATCH_OVERHEAD + len(compress(p.codec, records_section(b), p.level))
                                         for b in batches)
        if p.codec == "none":
            assert p.compressed_bytes == p.uncompressed_bytes and p.compress_cpu_s == (0.0, 0.0)
        else:
            assert len(p.compress_cpu_s) == 2 and all(t > 0 for t in p.compress_cpu_s + p.decompress_cpu_s)
            assert p.compressed_bytes < p.uncompressed_bytes
    # what Kafka would read back: one batch's payload decompresses to its records section
    one = encode_batch(cut(LOGS, max_bytes=4096)[0], codec="snappy")
    assert decompress("snappy", one[61:]) == encode_batch(cut(LOGS, max_bytes=4096)[0])[61:]


def test_sizes_do_not_depend_on_repeats_or_on_how_partitions_are_split():
    a = measure_partition(LOGS, CELLS, repeats=1)
    b = measure_partition(LOGS, CELLS, repeats=3)
    assert [p.compressed_bytes for p in a] == [p.compressed_bytes for p in b]
    two = measure_sample({0: LOGS[:1500], 1: LOGS[1500:]}, CELLS, repeats=1)
    parts = measure_partition(LOGS[:1500], CELLS, repeats=1) + measure_partition(LOGS[1500:], CELLS, repeats=1)
    for r, c in zip(two, CELLS, strict=True):
        mine = [p for p in parts if (p.codec, p.level, p.batch_bytes) == (c.setting.codec, c.setting.level,
                                                                          c.batch_bytes)]
        assert r.compressed_bytes == sum(p.compressed_bytes for p in mine)
        assert r.records == 3000 and r.batches == sum(p.batches for p in mine)


def test_a_slow_cell_is_not_repeated_once_it_has_taken_enough_cpu(monkeypatch):
    monkeypatch.setattr(measure, "SLOW_CELL_S", 0.0)
    [p] = measure_partition(LOGS, [Cell(Setting("zstd", 19), 65536)], repeats=5)
    assert len(p.compress_cpu_s) == 1


def _partial(cpu: tuple[float, ...], compressed: int) -> Partial:
    return Partial(codec="zstd", level=3, batch_bytes=65536, batches=2, records=1000, record_bytes=90_000,
                   section_bytes=100_000, uncompressed_bytes=100_122, compressed_bytes=compressed,
                   compress_cpu_s=cpu, decompress_cpu_s=tuple(t / 4 for t in cpu))


def test_fold_sums_partitions_per_repeat_then_takes_the_median():
    cells = [Cell(Setting("zstd", 3), 65536)]
    [r] = fold([_partial((1.0, 3.0, 2.0), 20_000), _partial((1.0, 1.0, 5.0, 9.0), 30_000)], cells)
    assert r.compress_cpu_s == 4.0  # per repeat: 2, 4, 7 (a 4th repeat is not in every partition): median 4
    assert r.compressed_bytes == 50_000 and r.records == 2000 and r.uncompressed_bytes == 200_244
    assert r.ratio == pytest.approx(200_244 / 50_000)
    assert r.bytes_per_record == 25.0
    assert r.compress_mb_s == pytest.approx(0.200244 / 4.0)
    assert r.compress_cpu_s_per_1m == pytest.approx(2000.0)
    with pytest.raises(ValueError, match="no figures for lz4 at 65536 B"):
        fold([], [Cell(Setting("lz4", None), 65536)])
