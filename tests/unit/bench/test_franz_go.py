"""bench.copiers' franz-go copier without a broker or a Go toolchain: the command line its starter builds, that
bench/franz_go/main.go defines every flag it passes (trickle/main.go too), and the error when `go` is missing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import copiers
from bench.copiers import Batching, build_franz_go, franz_go_command

# bench's CLI, invoked here in-process, sets the process's logging (warning and up): put back after each test, so
# that a later test capturing info lines in this process sees them
pytestmark = pytest.mark.usefixtures("fresh_structlog")

BINARY = Path("/cache/franz-go/franzgo")


def test_the_command_carries_the_copy_and_the_benchs_batching() -> None:
    cmd = franz_go_command(BINARY, "127.0.0.1:19092", "src", "dst", "zstd", 5000, Batching(1_048_576, 500))
    assert cmd == ["/cache/franz-go/franzgo", "--bootstrap", "127.0.0.1:19092", "--source", "src",
                   "--destination", "dst", "--codec", "zstd", "--records", "5000",
                   "--batch-max-bytes", "1048576", "--linger-ms", "500"]


def test_a_level_is_passed_only_when_given() -> None:
    cmd = franz_go_command(BINARY, "b:9092", "src", "dst", "gzip", 10, Batching(65_536, 5), level=1)
    assert cmd[cmd.index("--level") + 1] == "1"
    assert cmd[cmd.index("--batch-max-bytes") + 1] == "65536" and cmd[cmd.index("--linger-ms") + 1] == "5"
    assert "--level" not in franz_go_command(BINARY, "b:9092", "src", "dst", "gzip", 10, Batching())


def test_every_flag_the_starter_passes_is_defined_by_the_go_program() -> None:
    source = (copiers.FRANZ_GO_MODULE / "main.go").read_text()
    defined = set(re.findall(r'flag\.\w+\("([a-z-]+)"', source))
    cmd = franz_go_command(BINARY, "b:9092", "src", "dst", "lz4", 10, Batching(), level=3, fetch_partition_bytes=1)
    passed = {a.removeprefix("--") for a in cmd if a.startswith("--")}
    assert passed <= defined, passed - defined


def test_every_flag_the_latency_trickle_is_given_is_defined_by_its_go_program() -> None:
    source = (copiers.FRANZ_GO_MODULE / "trickle" / "main.go").read_text()
    defined = set(re.findall(r'flag\.\w+\("([a-z-]+)"', source))
    cmd = copiers.trickle_command(BINARY, "b:9092", "src", "dst", Path("/tmp/r"), rate=350_000.4, timed=1000,
                                  timeout=120.0)
    passed = {a.removeprefix("--") for a in cmd if a.startswith("--")}
    assert passed == defined, passed ^ defined
    assert cmd[cmd.index("--rate") + 1] == "350000.4" and cmd[cmd.index("--timed-records") + 1] == "1000"
    slow = copiers.trickle_command(BINARY, "b:9092", "src", "dst", Path("/tmp/r"), rate=0.25, timed=1, timeout=1.0)
    assert slow[slow.index("--rate") + 1] == "0.25"  # Go's flag takes a float: never rounded to 0


def test_the_build_says_go_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copiers.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Go"):
        build_franz_go()


def test_a_codec_level_is_read_from_the_codecs_option() -> None:
    assert copiers.codec_level("gzip:5") == ("gzip", 5)
    assert copiers.codec_level("zstd") == ("zstd", None)


def test_a_level_for_a_copier_that_takes_none_or_a_bad_one_is_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from bench.__main__ import main

    out = CliRunner().invoke(main, ["--codecs", "gzip:5", "--copiers", "transcoder,mm2", "--out", str(tmp_path / "r")])
    assert out.exit_code == 2 and "taken by transcoder, transcoder-records, franz-go only, not by mm2" in out.output
    out = CliRunner().invoke(main, ["--codecs", "gzip:x", "--copiers", "transcoder"])
    assert out.exit_code == 2 and "unknown codec or copier: gzip:x" in out.output


def test_a_fetch_size_is_passed_only_when_given() -> None:
    cmd = franz_go_command(BINARY, "b:9092", "src", "dst", "lz4", 10, Batching(), fetch_partition_bytes=4_194_304)
    assert cmd[cmd.index("--fetch-max-partition-bytes") + 1] == "4194304"
    assert "--fetch-max-partition-bytes" not in franz_go_command(BINARY, "b:9092", "src", "dst", "lz4", 10, Batching())
