"""The docs' code blocks as tests/integration/test_docs_commands.py reads them (tests/support/doc_blocks.py): which
run, which are skipped and why, which are files, and the bash program a page becomes. No broker."""

from __future__ import annotations

import subprocess
import textwrap

from tests.support import doc_blocks


def page(text: str) -> doc_blocks.Page:
    return doc_blocks.parse(textwrap.dedent(text), "p.md")


def test_bash_blocks_run_and_other_blocks_do_not():
    p = page("""\
        Intro.

        ```bash
        transcoder seed --topic t
        ```

        ```text
        output
        ```

        ```yaml
        a: 1
        ```
        """)
    assert not p.problems
    assert [(b.lang, b.runs, b.line) for b in p.blocks] == [("bash", True, 3), ("text", False, 7),
                                                             ("yaml", False, 11)]
    assert p.blocks[0].body == "transcoder seed --topic t\n"


def test_a_block_not_run_says_why_on_the_line_above():
    p = page("""\
        <!-- not run: needs a Kubernetes cluster -->
        ```bash
        kubectl apply -f x.yaml
        ```
        """)
    assert not p.problems
    (b,) = p.blocks
    assert not b.runs and b.not_run == "needs a Kubernetes cluster"


def test_a_block_not_run_without_a_reason_is_a_problem():
    for marker in ("<!-- not run -->", "<!-- not run: -->", "<!--not-run:   -->"):
        p = page(f"{marker}\n```bash\nmake demo\n```\n")
        assert any("without a reason" in pr for pr in p.problems), (marker, p.problems)
        assert not p.blocks[0].runs


def test_a_marker_away_from_its_block_is_a_problem():
    p = page("<!-- not run: too far -->\n\n```bash\nmake demo\n```\n")
    assert any("right above" in pr for pr in p.problems)
    assert p.blocks[0].runs  # and the block is not skipped by it


def test_other_shell_fences_are_refused():
    for lang in ("sh", "console", "shell", "zsh"):
        p = page(f"```{lang}\n$ transcoder run\n```\n")
        assert any("go in ```bash" in pr for pr in p.problems), lang


def test_named_files_are_written_for_the_page():
    p = page("""\
        <!-- file: tour.yaml -->
        ```yaml
        cluster: {bootstrap_servers: 127.0.0.1:9092}
        metrics: {port: 9308}
        ```

        ```bash
        transcoder run --config tour.yaml
        ```
        """)
    assert not p.problems
    (s,) = doc_blocks.scripts([p])
    assert s.files == (("tour.yaml", "cluster: {bootstrap_servers: 127.0.0.1:9092}\nmetrics: {port: 9308}\n"),)
    assert [b.line for b in s.commands] == [7]


def test_bad_file_markers_are_problems():
    assert page("<!-- file: ../x.yaml -->\n```yaml\na: 1\n```\n").problems
    assert page("<!-- file: -->\n```yaml\na: 1\n```\n").problems
    assert page("<!-- file: x.sh -->\n```bash\necho\n```\n").problems
    twice = "<!-- file: x.yaml -->\n```yaml\na: 1\n```\n\n<!-- file: x.yaml -->\n```yaml\na: 2\n```\n"
    assert any("more than one block" in pr for pr in page(twice).problems)


def test_blocks_in_list_items_and_longer_fences():
    p = page("""\
        - a step:

            ```bash
            transcoder validate --config c.yaml
            ```

        ````text
        ```bash
        not a block of its own
        ```
        ````
        """)
    assert not p.problems
    assert [(b.lang, b.body) for b in p.blocks] == [
        ("bash", "transcoder validate --config c.yaml\n"),
        ("text", "```bash\nnot a block of its own\n```\n")]


def test_an_unclosed_block_is_a_problem():
    assert any("never closed" in pr for pr in page("```bash\necho\n").problems)


def test_the_local_broker_and_the_metrics_port_are_replaced():
    text = "-b 127.0.0.1:9092 --url http://localhost:9308 port: 9308, not 19308 or 93081"
    assert doc_blocks.substitute(text, "127.0.0.1:40001", 40002) == (
        "-b 127.0.0.1:40001 --url http://localhost:40002 port: 40002, not 19308 or 93081")


def test_pages_with_the_same_commands_share_one_script():
    text = "Words.\n\n```bash\ntranscoder seed --topic t\n```\n"
    other = ("Other words.\n\n<!-- not run: a reason -->\n```bash\nmake demo\n```\n\n"
             "```bash\ntranscoder seed --topic t\n```\n")
    a, b, c = doc_blocks.parse(text, "README.md"), doc_blocks.parse(other, "docs/tour.md"), doc_blocks.parse(
        "```bash\necho other\n```\n", "docs/x.md")
    scripts = doc_blocks.scripts([a, b, c])
    assert [s.name for s in scripts] == ["README.md+docs/tour.md", "docs/x.md"]


def test_the_program_stops_at_the_first_failure_and_names_its_block(tmp_path):
    p = page("""\
        ```bash
        echo one
        sleep 30 &
        ```

        ```bash
        false
        echo never
        ```
        """)
    program = doc_blocks.bash(doc_blocks.scripts([p])[0], "127.0.0.1:1", 1)
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=20, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == "one\n"
    assert proc.stderr.strip().splitlines()[-1] == "### p.md:6"  # the failing block; the sleep was stopped


def test_the_program_succeeds_when_every_command_does(tmp_path):
    p = page("```bash\necho 127.0.0.1:9092 > out.txt\n```\n")
    program = doc_blocks.bash(doc_blocks.scripts([p])[0], "127.0.0.1:40001", 1)
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=20, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.txt").read_text() == "127.0.0.1:40001\n"


def test_transcoder_commands_are_read_as_the_shell_passes_them():
    (b,) = page("""\
        ```bash
        transcoder seed --kind nginx --count 10 --topic t     # a comment
        transcoder run --config c.yaml 2> run.log &
        until transcoder report --url http://localhost:9308 > /dev/null 2>&1; do kill -0 %1 || break; done
        TRANSCODER__GROUP_ID=x transcoder validate \\
          --config c.yaml
        kubectl get sparkapplication transcoder
        kill %1 && wait %1
        ```
        """).blocks
    assert doc_blocks.transcoder_commands(b) == [
        ["seed", "--kind", "nginx", "--count", "10", "--topic", "t"],
        ["run", "--config", "c.yaml"],
        ["report", "--url", "http://localhost:9308"],
        ["validate", "--config", "c.yaml"],
    ]
