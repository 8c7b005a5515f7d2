"""The error catalogue (docs/reference/errors.md) is the generator's output, the generator reads what the code
raises, and every error line docs/troubleshooting.md quotes still occurs in the code. No broker."""

from __future__ import annotations

import difflib
import re
import textwrap
from pathlib import Path

from transcoder.dev import error_catalogue as ec

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "reference" / "errors.md"
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"
PREFIX = "transcoder: error: "


def test_page_is_the_generators_output():
    written = PAGE.read_text() if PAGE.exists() else ""
    diff = list(difflib.unified_diff(written.splitlines(), ec.page().splitlines(), "docs/reference/errors.md",
                                     "generated", lineterm="", n=1))
    assert not diff, ("docs/reference/errors.md is not what the generator writes: regenerate it from the "
                      f"repository's root with `{ec.REGENERATE}`\n" + "\n".join(diff[:60]))


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pkg"
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(textwrap.dedent(text))
    return pkg


def test_the_catalogue_reads_messages_classes_and_exit_codes_from_the_source(tmp_path):
    pkg = _package(tmp_path, {
        "errors.py": """
            class ExitCode: ...
            class TranscoderError(Exception):
                '''The root.'''
                exit_code: int = 1
            class ConfigError(TranscoderError):
                exit_code = 2
            class RefusedError(TranscoderError):
                exit_code = ExitCode.REFUSED
            class Unrelated(Exception): ...
            """,
        "cli/run.py": """
            from pkg.errors import ConfigError, RefusedError, TranscoderError, Unrelated
            class NotFound(ConfigError): ...
            def f(topic, parts, msg):
                raise ConfigError(f"topic {topic.name} has {len(parts)} partitions, not "
                                  "the ones asked for: " + ", ".join(parts))
                raise NotFound("a subclass, with `code` in it")
                raise RefusedError(msg)
                raise Unrelated("not one of ours")
                return TranscoderError(f"made here, raised by the caller: {why(topic)}")
            """,
        "config/model.py": """
            def check(v):
                if v:
                    raise ValueError(f"{v} is too large")
                return ValueError("made, not raised")
            """,
    })
    entries, classes, unwritten = ec.catalogue(pkg)
    assert set(classes) == {"TranscoderError", "ConfigError", "RefusedError", "NotFound"}
    assert [(e.module, e.error, e.message) for e in entries] == [
        ("pkg/cli/run.py", "NotFound", "a subclass, with `code` in it"),
        ("pkg/cli/run.py", "TranscoderError", "made here, raised by the caller: {why}"),
        ("pkg/cli/run.py", "ConfigError", "topic {name} has {parts} partitions, not the ones asked for: {…}"),
        ("pkg/config/model.py", "ConfigError", "{v} is too large"),
    ]
    assert unwritten == 1  # RefusedError(msg)
    codes = ec.exit_codes(classes, {"REFUSED": 3})
    assert codes == {"TranscoderError": 1, "ConfigError": 2, "RefusedError": 3, "NotFound": 2}
    page = ec.render(entries, classes, codes, unwritten)
    assert "| ``a subclass, with `code` in it`` | `NotFound` | 2 |" in page
    assert "4 messages; 1 more errors build their message elsewhere" in page


def test_the_real_catalogue_has_the_errors_an_operator_meets_first():
    entries, classes, _ = ec.catalogue()
    assert {"TranscoderError", "ConfigError", "KafkaUnavailableError", "MigrationError"} <= set(classes)
    messages = {e.message for e in entries}
    assert ("no --bootstrap-servers given (or TRANSCODER_BOOTSTRAP_SERVERS), and no local broker runs: start one "
            "with `transcoder local-kafka up`") in messages
    assert len(entries) > 200


def test_a_message_with_backticks_stays_one_code_span():
    assert ec._cell("plain") == "`plain`"
    assert ec._cell("run `x` first") == "``run `x` first``"
    assert ec._cell("`x` ends with `y`") == "`` `x` ends with `y` ``"
    assert ec._cell("a | b") == "`a \\| b`"


def _quoted(text: str) -> list[str]:
    """The error lines a page shows in its ```text blocks."""
    blocks = re.findall(r"^```text\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [line[len(PREFIX):] for b in blocks for line in b.splitlines() if line.startswith(PREFIX)]


def test_every_error_line_on_the_troubleshooting_page_occurs_in_the_code():
    quoted = _quoted(TROUBLESHOOTING.read_text())
    assert len(quoted) >= 20
    messages = {e.message for e in ec.catalogue()[0]}
    gone = [q for q in quoted if q not in messages]
    assert not gone, ("docs/troubleshooting.md quotes error lines the code no longer has (the catalogue, "
                      "docs/reference/errors.md, has the current text):\n" + "\n".join(gone))



def test_every_command_an_error_tells_to_run_exists():
    """An error that says what to run (`transcoder local-kafka up`) names a command the CLI has, never a wrapper or
    a command since renamed."""
    import click

    from transcoder.cli import main

    named = {m.group(1) for e in ec.catalogue()[0] for m in re.finditer(r"`(transcoder [a-z][a-z -]*)", e.message)}
    assert "transcoder local-kafka up" in named
    missing = []
    for text in sorted(named):
        command: click.Command = main
        for word in text.split()[1:]:
            if not isinstance(command, click.Group) or word not in command.commands:
                break
            command = command.commands[word]
        else:
            continue
        if command is main:
            missing.append(text)
    assert not missing, f"errors name commands the CLI does not have: {missing}"
    assert not any("deploy/local/kafka" in e.message for e in ec.catalogue()[0])


def test_the_no_broker_error_as_an_operator_meets_it(tmp_path, monkeypatch):
    """`seed` with no cluster and no local broker: the line troubleshooting.md quotes, exit 2, nothing attempted."""
    from click.testing import CliRunner

    from transcoder.cli import main

    monkeypatch.delenv("TRANSCODER_BOOTSTRAP_SERVERS", raising=False)
    result = CliRunner().invoke(main, ["seed", "--kind", "nginx", "--count", "1", "--topic", "t"],
                                env={"TRANSCODER_LOCAL_KAFKA_DIR": str(tmp_path)})
    assert result.exit_code == 2
    line = ("no --bootstrap-servers given (or TRANSCODER_BOOTSTRAP_SERVERS), and no local broker runs: start one "
            "with `transcoder local-kafka up`")
    assert result.output == f"{PREFIX}{line}\n"
    assert line in _quoted(TROUBLESHOOTING.read_text())
