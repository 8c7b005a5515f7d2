"""The transactional attribute (bit 0x10 of a v2 batch's attributes) as the compiled part writes it: seal_sections,
encode_batch(es) and restamp set it on request, the CRC-32C (which covers the attributes) computed after it, and
every other byte is the non-transactional batch's."""

from __future__ import annotations

import struct

import pytest
import transcoder_native as native
from kafka.record import MemoryRecords
from kafka.record.util import calc_crc32c

from transcoder import codecs
from transcoder.codecs import ATTRIBUTE_ID, CODECS

T0 = 1_700_000_000_000
ATTRIBUTES = slice(21, 23)
CRC = slice(17, 21)


def records(n: int) -> list[tuple]:
    return [(f"k{i}".encode() if i % 3 else None, b"value-%d" % i if i % 7 else None,
             [("h", b"x"), ("empty", None)] if i % 5 == 0 else [], T0 + i) for i in range(n)]


def sections(n: int) -> list:
    rb = native.Rebatcher(1 << 20, 1000)
    rb.add(native.decode_stored(native.encode_batch(records(n)), 0), 0)
    return rb.take(flush=True)


def attributes(batch: bytes) -> int:
    return struct.unpack(">h", batch[ATTRIBUTES])[0]


def crc_valid(batch: bytes) -> bool:
    return struct.unpack(">I", batch[CRC])[0] == calc_crc32c(batch[21:])


def assert_differ_only_in_the_bit(plain: bytes, txn: bytes) -> None:
    """`txn` is `plain` with bit 0x10 set and its CRC again: byte for byte the same otherwise."""
    assert len(plain) == len(txn)
    assert attributes(plain) & 0x10 == 0 and attributes(txn) == attributes(plain) | 0x10
    assert crc_valid(plain) and crc_valid(txn) and plain[CRC] != txn[CRC]
    assert plain[:17] == txn[:17] and plain[23:] == txn[23:]
    header = MemoryRecords(bytes(txn)).next_batch()
    assert header.is_transactional and not header.is_control_batch and header.validate_crc()
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in header] == [
        (r.key, r.value, list(r.headers), r.timestamp) for r in MemoryRecords(bytes(plain)).next_batch()]


@pytest.mark.parametrize("codec", CODECS)
def test_seal_sections_sets_the_bit_only_when_asked(codec: str):
    stamps = [(7, 3, 100)]
    plain, = native.seal_sections(sections(50), stamps, codec=codec)
    default, = native.seal_sections(sections(50), stamps, codec=codec, transactional=False)
    txn, = native.seal_sections(sections(50), stamps, codec=codec, transactional=True)
    assert default == plain and not MemoryRecords(bytes(plain)).next_batch().is_transactional
    assert_differ_only_in_the_bit(plain, txn)
    assert attributes(txn) & 0x07 == ATTRIBUTE_ID[codec]


@pytest.mark.parametrize("codec", CODECS)
def test_encode_batch_and_encode_batches_set_the_bit_only_when_asked(codec: str):
    recs = records(40)
    plain = codecs.encode_batch(recs, codec=codec, producer_id=9, producer_epoch=1, base_sequence=0)
    txn = codecs.encode_batch(recs, codec=codec, producer_id=9, producer_epoch=1, base_sequence=0, transactional=True)
    assert_differ_only_in_the_bit(plain, txn)
    jobs = [(recs, 9, 1, 0), (recs[:5], 9, 1, 40)]
    many = codecs.encode_batches(jobs, codec=codec)
    many_txn = codecs.encode_batches(jobs, codec=codec, transactional=True)
    assert many[0] == plain
    for p, t in zip(many, many_txn, strict=True):
        assert_differ_only_in_the_bit(p, t)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_restamp_keeps_sets_or_clears_the_bit(codec: str):
    plain, = native.seal_sections(sections(30), [(5, 0, 0)], codec=codec)
    txn, = native.seal_sections(sections(30), [(5, 0, 0)], codec=codec, transactional=True)
    # None (the default) keeps the attributes as they are: a transactional batch stays one
    assert codecs.restamp(txn, 5, 0, 0) == txn and codecs.restamp(plain, 5, 0, 0) == plain
    kept = codecs.restamp(txn, 6, 2, 40)
    assert attributes(kept) & 0x10 and crc_valid(kept)
    # set and clear: the same bytes as sealing it so under that stamp in the first place
    sealed_again, = native.seal_sections(sections(30), [(6, 2, 40)], codec=codec, transactional=True)
    assert codecs.restamp(plain, 6, 2, 40, transactional=True) == sealed_again == kept
    plain_again, = native.seal_sections(sections(30), [(6, 2, 40)], codec=codec)
    assert codecs.restamp(txn, 6, 2, 40, transactional=False) == plain_again
    assert_differ_only_in_the_bit(plain_again, kept)
    assert codecs.restamp(txn, 5, 0, 0, transactional=True) == txn  # setting a set bit changes nothing


def test_the_bit_does_not_touch_the_codec_or_timestamp_type_bits():
    batch = bytearray(native.encode_batch(records(3), codec="lz4"))
    struct.pack_into(">h", batch, 21, attributes(bytes(batch)) | 0x08)  # LogAppendTime, as a broker may store it
    batch[CRC] = struct.pack(">I", calc_crc32c(bytes(batch[21:])))
    set_ = codecs.restamp(bytes(batch), 1, 0, 0, transactional=True)
    assert attributes(set_) == 0x08 | 0x10 | 0x03 and crc_valid(set_)
    assert attributes(codecs.restamp(set_, 1, 0, 0, transactional=False)) == 0x08 | 0x03
