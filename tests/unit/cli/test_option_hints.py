"""An error names only options of the command it comes from (issue 42): a hint naming another command's option (run
has no --partitions, evaluate's input format is --input-format, its --format is the output's, rollback has no
--force) sends the user to an option that is not there."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import one_line, run_cli
from transcoder.migrate.gates import Rewind, rewind_line


def test_evaluate_key_field_on_plain_lines_names_evaluates_own_format_option(tmp_path: Path):
    lines = tmp_path / "lines.txt"
    lines.write_text("a\nb\n")
    proc = run_cli("evaluate", "--file", str(lines), "--key-field", "id", timeout=60)
    assert proc.returncode == 2
    assert one_line(proc) == ("transcoder: error: --key-field needs NDJSON input (.ndjson or .jsonl files, or "
                              "--input-format ndjson)")


def test_evaluate_current_names_current_not_codecs():
    proc = run_cli("evaluate", "--kind", "nginx", "--count", "10", "--current", "zstd:99", timeout=60)
    assert proc.returncode == 2
    assert one_line(proc) == ("transcoder: error: --current 'zstd:99': level 99 is outside 1..22, the range of zstd "
                              "levels")


def test_a_rollbacks_rewind_names_no_force_option():
    found = [Rewind(0, 900, 100)]
    assert "--force" not in rewind_line("rollback", "g", "orders", found)
    assert rewind_line("cutover", "g", "orders.zstd", found).endswith(
        "nothing was committed; a rewind cannot be overridden")
