"""Exit codes on the real broker, where only a broker can make the case: records lost from the source before they
were copied end `run` (on_source_loss: stop) and `migrate verify` with 4 (DATA_LOSS), not 1 or 3. (A copy that
differs exits 3: tests/integration/test_migrate.py; every case without a broker: tests/unit/cli/test_exit_codes.py.)
"""

from __future__ import annotations

import uuid

from confluent_kafka import TopicPartition

from tests.support.cli import run_cli
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
