"""The evaluate grid from the command line's specs: settings, batch sizes, and one-line errors."""

from __future__ import annotations

import pytest

from transcoder.codecs import CODECS
from transcoder.errors import ConfigError
from transcoder.evaluate.grid import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_CODECS,
    Setting,
    batch_sizes,
    grid,
    settings,
)


def test_codec_specs_give_one_setting_per_level_in_order_each_once():
    got = settings(["zstd:1,3,19", "lz4", "gzip:1,6", "zstd:3", "none"])
    assert got == [Setting("zstd", 1), Setting("zstd", 3), Setting("zstd", 19), Setting("lz4", None),
                   Setting("gzip", 1), Setting("gzip", 6), Setting("none", None)]
    assert [s.label for s in got[:4]] == ["zstd-1", "zstd-3", "zstd-19", "lz4"]


def test_the_default_grid_is_every_codec_every_gzip_and_zstd_level_and_lz4s_high_levels():
    labels = [s.label for s in settings(DEFAULT_CODECS)]
    assert labels[:11] == ["none", *[f"gzip-{n}" for n in range(1, 10)], "snappy"]
    assert labels[11:] == ["lz4", "lz4-3", "lz4-6", "lz4-9", "lz4-12", *[f"zstd-{n}" for n in range(1, 23)]]


def test_zstd_fast_levels_are_measured_for_java_producers():
    assert [s.label for s in settings(["zstd:-5,-1"])] == ["zstd-fast5", "zstd-fast1"]
    assert DEFAULT_BATCH_SIZES == (16384, 65536, 262144, 1048576, 4194304)


@pytest.mark.parametrize("spec,message", [
    ("brotli", rf"--codecs 'brotli': unknown codec 'brotli' \(one of {', '.join(CODECS)}\)"),
    ("zstd:23", r"--codecs 'zstd:23': level 23 is outside 1..22, the range of zstd levels"),
    ("snappy:1", r"--codecs 'snappy:1': codec snappy has no compression levels"),
    ("gzip:fast", r"--codecs 'gzip:fast': 'fast' is not a level"),
])
def test_bad_codec_specs_are_one_line(spec, message):
    with pytest.raises(ConfigError, match=message) as err:
        settings([spec])
    assert "\n" not in str(err.value)


def test_batch_sizes_stay_within_max_message_bytes():
    assert batch_sizes([1048576, 65536, 65536]) == [65536, 1048576]
    assert batch_sizes(DEFAULT_BATCH_SIZES, max_message_bytes=1048588) == [16384, 65536, 262144, 1048576]
    assert batch_sizes([4194304], max_message_bytes=1048588) == [1048588]  # defaults: at most the topic's limit
    with pytest.raises(ConfigError, match=r"4,194,304 B is above the topic's max.message.bytes \(1,048,588 B\)"):
        batch_sizes([65536, 4194304], max_message_bytes=1048588, explicit=True)
    with pytest.raises(ConfigError, match="positive sizes"):
        batch_sizes([0])


def test_the_grid_is_every_setting_at_every_size():
    cells = grid(settings(["zstd:3", "lz4"]), [65536, 1048576])
    assert [(c.setting.label, c.batch_bytes) for c in cells] == [
        ("zstd-3", 65536), ("zstd-3", 1048576), ("lz4", 65536), ("lz4", 1048576)]
