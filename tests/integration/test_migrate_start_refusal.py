"""`transcoder migrate start` refused for a group it cannot register writes nothing: no migration, no group (issue 42).

The old controller recorded the migration (and every group named before the unknown one) in the state topic, then
refused: the next step found a migration the operator was told had not started.
"""

from __future__ import annotations

import uuid

from tests.support.cli import one_line
from tests.support.migration import consume_group, migrate, produce, setup
from transcoder.migrate.lease import CONTROLLER_PREFIX
from transcoder.migrate.state import StateStore
from transcoder.service.runner import Service


def _recorded(conf, dest: str) -> dict[str, dict]:
    """The migration's records in its state topic, the controllers' leases left out."""
    with StateStore(conf, dest) as store:
        return {k: v for k, v in store.read().items() if not k.startswith(CONTROLLER_PREFIX)}


def test_start_with_an_unknown_group_records_nothing(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    produce(kafka, source, 20, 1)
    known, other = (f"app-{uuid.uuid4().hex[:6]}" for _ in range(2))
    consume_group(kafka, known, source, stop_after=10)
    consume_group(kafka, other, source, stop_after=5)
    path, conf, dest = setup(tmp_path, kafka, source)
    Service(conf).run(until_caught_up=True)  # the copy, and its offset map

    # a fresh migration: nothing recorded, the next step still says it has not started
    line = one_line(migrate("start", "--config", path, "--group", "no-such-group", ok=False))
    assert "no-such-group" in line
    assert _recorded(conf, dest) == {}
    assert "has not been started" in one_line(migrate("status", "--config", path, ok=False))

    # a started one: a typo among the groups registers none of them
    migrate("start", "--config", path, "--group", known)
    before = _recorded(conf, dest)
    # (with the prediction and the first reading `migrate report` sets against each other)
    assert sorted(k for k in before if not k.startswith("reading/")) == ["group/" + known, "migration", "prediction"]
    assert sum(k.startswith("reading/") for k in before) == 1
    assert before["group/" + known]["source_offsets"] == {"0": 10}
    proc = migrate("start", "--config", path, "--group", other, "--group", "no-such-group", ok=False)
    assert proc.returncode != 0 and "no-such-group" in one_line(proc)
    assert _recorded(conf, dest) == before
