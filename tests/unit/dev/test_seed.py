"""Seeding's pure parts: file sources, sizes, the generated timeline's placement."""

from __future__ import annotations

import gzip

import pytest

from transcoder.dev.datagen import Record
from transcoder.dev.seed import FileSource, SeedResult, generator_start_ms, record_size, retention_for
from transcoder.errors import ConfigError, InputError


def test_lines_skip_blank_and_strip_newlines(tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes(b"a\r\n\nb\nc")
    src = FileSource(f)
    assert [r.value for r in src] == [b"a", b"b", b"c"]
    assert src.where == f"{f}:4"


def test_directory_is_read_in_name_order_and_hidden_files_skipped(tmp_path):
    (tmp_path / "2.log").write_text("two\n")
    (tmp_path / "1.log").write_text("one\n")
    (tmp_path / ".hidden").write_text("no\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    with gzip.open(sub / "3.log.gz", "wt") as g:
        g.write("three\n")
    assert [r.value for r in FileSource(tmp_path)] == [b"one", b"two", b"three"]


def test_ndjson_key_field(tmp_path):
    f = tmp_path / "e.jsonl"
    f.write_text('{"id": "a", "v": 1}\n{"id": 7}\n{"id": null}\n{"id": {"x": 1}}\n')
    assert [r.key for r in FileSource(f, key_field="id")] == [b"a", b"7", None, b'{"x":1}']


def test_ndjson_errors_name_file_and_line(tmp_path):
    f = tmp_path / "e.ndjson"
    f.write_text('{"id": "a"}\nnot json\n')
    with pytest.raises(InputError, match=rf"{f}:2: not a JSON object"):
        list(FileSource(f))
    f.write_text('{"id": "a"}\n{"other": 1}\n')
    with pytest.raises(InputError, match=rf"{f}:2: no field 'id'"):
        list(FileSource(f, key_field="id"))


def test_bad_sources(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        FileSource(tmp_path / "missing")
    with pytest.raises(InputError, match="holds no files"):
        FileSource(tmp_path)
    (tmp_path / "f").write_text("x\n")
    with pytest.raises(ConfigError, match="needs NDJSON"):
        FileSource(tmp_path / "f", fmt="lines", key_field="id")


def test_record_size_counts_key_value_and_headers():
    r = Record(key=b"kk", value=b"vvv", headers=(("h", b"12"), ("h", b"")), timestamp_ms=0)
    assert record_size(r) == 2 + 3 + 1 + 2 + 1
    assert record_size(Record(key=None, value=None, headers=(), timestamp_ms=0)) == 0


def test_generated_timeline_ends_about_now():
    now = 1_800_000_000_000
    assert generator_start_ms(2000, None, 1000.0, now) == now - 2000  # 2,000 records at 1,000/s: 2 s
    start = generator_start_ms(None, 10_000_000, 2000.0, now)
    assert now - 86_400_000 < start < now


def test_summary_line():
    s = SeedResult(topic="t", partitions=3, created=True, records=100_000, bytes=25_000_000, seconds=2.0)
    assert s.summary() == ("seeded 100,000 records, 25.0 MB (avg 250 B) into t (3 partitions, created) "
                           "in 2.0s: 50,000 records/s")


def test_records_stamped_before_the_default_retention_get_a_retention_that_keeps_them():
    day = 24 * 3600 * 1000
    now = 1_800_000_000_000
    assert retention_for(now - 2 * day, now) is None  # Kafka's default week keeps them
    # 26 days old (a --start of the month's first day): the broker would delete them at its next retention check
    assert retention_for(now - 26 * day, now) == str(33 * day)
