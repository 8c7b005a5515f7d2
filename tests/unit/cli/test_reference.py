"""transcoder.cli.reference: the published CLI reference (docs/reference/cli.md) is the generator's output, every
command has its section, and no hidden option (an old spelling kept as an alias) is shown."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from transcoder.cli import main, reference
from transcoder.cli.options import Renamed

ROOT = Path(__file__).resolve().parents[3]


def test_the_published_page_is_the_generators_output():
    page = ROOT / reference.PAGE
    assert page.is_file(), f"{reference.PAGE} is missing: generate it with `{reference.REGENERATE}`"
    diff = list(difflib.unified_diff(page.read_text().splitlines(), reference.page().splitlines(),
                                     reference.PAGE, "generated", lineterm="", n=1))
    assert not diff, (f"{reference.PAGE} is out of date: regenerate it from the repository's root with "
                      f"`{reference.REGENERATE}`\n" + "\n".join(diff[:60]))


def test_main_prints_the_page(capsys):
    reference.main()
    assert capsys.readouterr().out == reference.page()


def test_every_command_has_a_section_and_every_group_links_its_commands():
    page = reference.page()
    paths = [ctx.command_path for ctx in reference.walk()]
    assert paths[:2] == ["transcoder", "transcoder run"] and "transcoder migrate watch" in paths
    assert set(main.commands) <= {p.split()[1] for p in paths[1:]}
    for path in paths:
        assert re.search(rf"^#+ `{path}`$", page, re.MULTILINE), path
    for path in paths[1:]:
        assert f"](#{path.replace(' ', '-')})" in page, f"no link to {path}"


def test_options_are_shown_with_type_default_and_environment_and_hidden_ones_are_not():
    page = reference.page()
    assert ("| `--config`, `-c` | path |  | `TRANSCODER_CONFIG` | Required. The YAML config file. |" in page)
    assert "| `--partition` | N[,N...] (repeatable) |  |  |" in page
    assert "| `--repeats` | integer from 1 to 50 | `3` |" in page
    assert "| `--headers`, `--no-headers` | flag pair | `--no-headers` |" in page
    hidden = {o for ctx in reference.walk() for p in ctx.command.params if p.hidden for o in p.opts}
    assert {"--file-format", "--local-kafka-dir", "-p"} <= hidden
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    shown = {o for line in rows for o in re.findall(r"`(-[-\w]+)`", line.split(" | ")[0])}
    renamed_only = {o for ctx in reference.walk() for p in ctx.command.params if isinstance(p, Renamed)
                    for o in p.opts} - {o for ctx in reference.walk() for p in ctx.command.params
                                        if not p.hidden for o in p.opts}
    assert not shown & renamed_only, shown & renamed_only
    assert "--local-kafka-dir" not in page


def test_renamed_options_and_values_are_listed_with_their_new_spelling():
    table = reference.page().split("## Renamed options")[1]
    assert "| `transcoder seed` | `--format` | `--input-format` |" in table
    assert "| `transcoder evaluate` | `--engine local` | `--engine service` |" in table
    aliases = [p for ctx in reference.walk() for p in ctx.command.params if isinstance(p, Renamed)]
    assert table.count("\n| `transcoder") == len(aliases) + 1  # and the one renamed value
