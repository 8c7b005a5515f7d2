"""Exit codes on the real broker, where only a broker can make the case: records lost from the source before they
were copied end `run` (on_source_loss: stop) and `migrate verify` with 4 (DATA_LOSS), not 1 or 3; a one-shot `run
--until-caught-up` stopped by SIGTERM before it caught up exits 143. (A copy that differs exits 3:
tests/integration/test_migrate.py; every case without a broker: tests/unit/cli/test_exit_codes.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import yaml
from confluent_kafka import TopicPartition

from tests.support.cli import run_cli
from tests.support.configs import raw_config
from tests.support.migration import consume_group, migrate, produce, setup
from transcoder.errors import ExitCode


def test_records_lost_before_they_were_copied_exit_run_and_verify_with_4(kafka, admin, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    produce(kafka, source, 100, 1)
    group = f"app-{uuid.uuid4().hex[:6]}"
    consume_group(kafka, group, source, stop_after=50)
    path, _, _ = setup(tmp_path, kafka, source)  # on_source_loss: stop, the default
    first = run_cli("run", "--config", path, "--until-caught-up")
    assert first.returncode == ExitCode.OK, first.stderr
    # The copy is stopped; the source gets 300 more records, and the first 150 of them are deleted before it read
    # them (retention or DeleteRecords overtaking a stopped lane).
    produce(kafka, source, 300, 1)
    for fut in admin.delete_records([TopicPartition(source, 0, 250)]).values():
        fut.result()

    lost = run_cli("run", "--config", path, "--until-caught-up")
    assert lost.returncode == ExitCode.DATA_LOSS, lost.stderr
    last = lost.stderr.strip().splitlines()[-1]
    assert last.startswith("transcoder: error: lane ") and f"source records 100..249 of {source} [0] (150) were " \
        "deleted before they were copied" in last, last

    migrate("start", "--config", path, "--group", group)
    verified = migrate("verify", "--config", path, ok=False)
    assert verified.returncode == ExitCode.DATA_LOSS, verified.stderr + verified.stdout
    line = verified.stderr.strip().splitlines()[-1]
    assert line.startswith("transcoder: error: verification found records lost from the source before they were "
                           "copied: partition 0: source offset 100: lost in the source before it was copied"), line


def test_sigterm_before_an_until_caught_up_copy_caught_up_exits_143(kafka, topic_factory, tmp_path):
    """`run --until-caught-up` is a one-shot copy: stopped by SIGTERM before every lane caught up (here: while its
    config, a FIFO, is read) it stops cleanly, copies nothing, and exits 143, not 0 (a service's SIGTERM stop, 0:
    tests/integration/test_service.py)."""
    source = topic_factory(partitions=1)
    produce(kafka, source, 10, 1)
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "transcoder", "run", "--config", str(fifo), "--until-caught-up"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "TRANSCODER_LOG_LEVEL": "warning"})
    try:
        fd = os.open(fifo, os.O_WRONLY)  # returns once transcoder opened the FIFO to read its config
        p.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        os.write(fd, yaml.safe_dump(raw_config(kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}]))
                 .encode())
        os.close(fd)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == ExitCode.SIGTERM, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == ("transcoder: error: run --until-caught-up stopped by SIGTERM before every "
                                            "lane caught up: run it again to copy the rest (it resumes from the last "
                                            "commit)")
