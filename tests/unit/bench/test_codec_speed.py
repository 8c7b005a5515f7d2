"""bench.codec_speed: the records cut as a lane cuts them, every record sealed once, and a row per codec."""

from __future__ import annotations

import itertools

import transcoder_native as native
from click.testing import CliRunner

from bench.codec_speed import main, sections
from transcoder.dev import seed


def test_the_records_are_cut_into_1_mib_sections_in_order_and_sealed_whole():
    recs = list(itertools.islice(seed.generated("nginx", seed_value=1, keys=True, headers=False,
                                                start_ms=1_700_000_000_000, events_per_second=2000.0), 9000))
    secs, raw = sections(iter(recs), 9000)
    assert [o for s in secs for o in s.offsets] == list(range(9000))
    assert len(secs) >= 2 and all(len(s) > 1000 for s in secs[:-1])  # ~300 B records: thousands per MiB
    assert raw == sum(len(r.key or b"") + len(r.value or b"") for r in recs)
    sealed = native.seal_sections(secs[:1], [(-1, -1, -1)], codec="zstd", level=None)[0]
    decoded = native.decode_stored(sealed, 0)
    assert len(decoded) == len(secs[0])


def test_a_row_per_codec_with_its_level():
    out = CliRunner().invoke(main, ["--records", "3000", "--repeat", "1", "--codecs", "none,gzip:5,zstd"])
    assert out.exit_code == 0, out.output
    rows = [line.split(" | ")[0].lstrip("| ") for line in out.output.splitlines() if line.startswith("| ")]
    assert rows == ["codec", "none", "gzip:5", "zstd"]


def test_an_unknown_codec_or_level_is_one_line_not_a_traceback():
    for spec in ("lzo", "gzip:77"):
        out = CliRunner().invoke(main, ["--records", "500", "--repeat", "1", "--codecs", spec])
        assert out.exit_code == 2 and f"--codecs: {spec}: " in out.output and "Traceback" not in out.output, out.output
