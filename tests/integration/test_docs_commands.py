"""Every command the docs show works: the ```bash blocks of README.md and docs/*.md run against the session's broker.

The conventions (docs/contributing.md, parsed by tests/support/doc_blocks.py): a page's ```bash blocks run in order,
in one bash (`set -euo pipefail`), in a scratch directory, with this venv first on the PATH; the files the page names
(`<!-- file: NAME -->` above a block) are written there first. The local broker's address (127.0.0.1:9092) and the
metrics port (9308) become the session broker's and a free port, in the files and in the commands. A block marked
`<!-- not run: REASON -->` is skipped, and must say why. Pages that show the same commands and files (README.md's
tour and docs/tour.md) run once. The pages use fixed topic and group names, so they need the session's own fresh
broker, not TRANSCODER_TEST_BOOTSTRAP's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import doc_blocks
from transcoder.dev.ports import free_port

PAGES = [doc_blocks.read(p) for p in doc_blocks.doc_paths()]
SCRIPTS = doc_blocks.scripts(PAGES)
#: one page's commands at most (the tour, the longest, takes about a minute on a busy 2-core machine)
TIMEOUT_S = 240
#: environment that would change what the docs' commands do (config overrides, another broker, a config file)
CLEARED = ("TRANSCODER_BOOTSTRAP_SERVERS", "TRANSCODER_LOCAL_KAFKA_DIR", "TRANSCODER_CONFIG", "TRANSCODER_URL",
           "TRANSCODER_ENGINE", "TRANSCODER_LOG_LEVEL", "TRANSCODER_DEBUG_CLIENTS")


def test_every_shell_block_runs_or_says_why_not():
    problems = [pr for page in PAGES for pr in page.problems]
    assert not problems, "\n".join(problems)
    shell = [b for page in PAGES for b in page.blocks if b.lang == doc_blocks.RUNS]
    skipped = [b for b in shell if not b.runs]
    assert skipped and all(b.not_run for b in skipped), [b.where for b in skipped if not b.not_run]
    assert SCRIPTS and {b.where for s in SCRIPTS for b in s.commands} >= {
        b.where for b in shell if b.runs and b.path == "README.md"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.name)
def test_the_commands_of(script: doc_blocks.Script, kafka, tmp_path: Path):
    if kafka.local is None:
        pytest.skip("the docs' commands use fixed topic and group names: they need the session's own broker")
    work = tmp_path / "work"
    work.mkdir()
    port = free_port()
    for name, text in script.files:
        (work / name).write_text(doc_blocks.substitute(text, kafka.bootstrap, port))
    program = tmp_path / "commands.sh"
    program.write_text(doc_blocks.bash(script, kafka.bootstrap, port))
    no_local = tmp_path / "no-local-broker"
    no_local.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CLEARED and not k.startswith("TRANSCODER__")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               TRANSCODER_BOOTSTRAP_SERVERS=kafka.bootstrap, TRANSCODER_LOCAL_KAFKA_DIR=str(no_local))
    proc = subprocess.Popen(["bash", str(program)], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # bash, and what it left running in the background
        out, err = proc.communicate()
        pytest.fail(f"{script.name}: not done in {TIMEOUT_S} s\n" + _report(err, out, work))
    assert proc.returncode == 0, f"{script.name}: exit {proc.returncode}\n" + _report(err, out, work)


def _report(err: str, out: str, work: Path) -> str:
    """Which block failed (the last `### page:line` the program printed), the end of its output, and of the logs
    its commands wrote (a background `transcoder run ... 2> run.log`)."""
    marks = [line for line in err.splitlines() if line.startswith("### ")]
    parts = [f"failed in the block at {marks[-1][4:] if marks else '?'}",
             "--- stdout (end)", *out.splitlines()[-40:], "--- stderr (end)", *err.splitlines()[-40:]]
    for log in sorted(work.glob("*.log")):
        parts += [f"--- {log.name} (end)", *log.read_text(errors="replace").splitlines()[-30:]]
    return "\n".join(parts)
