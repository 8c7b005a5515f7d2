"""Bad input to the Spark engine: one line and a non-zero exit, nothing copied."""

from __future__ import annotations

import json

import yaml

from tests.support.cli import run_cli
from tests.support.configs import raw_config
from transcoder.errors import ConfigError
from transcoder.spark.checkpoints import MARK


def test_a_checkpoint_written_by_another_config_is_refused_in_one_line(kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "copy").mkdir(parents=True)
    (checkpoints / "copy" / MARK).write_text(json.dumps(
        {"lane": "copy", "group_id": "g", "sources": ["payments"], "destinations": ["payments.zstd"]}))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw_config(kafka, [{"source": source, "destinations": [
        {"codec": "zstd", "name": "copy"}]}], spark={"master": "local[1]", "checkpoint_location": str(checkpoints)})))
    proc = run_cli("run", "--engine", "spark", "--config", str(path), "--until-caught-up")
    assert proc.returncode == ConfigError.exit_code
    lines = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"transcoder: error: checkpoint {checkpoints}/copy was written by another config "
                               f"(lane copy: sources payments; this config's lane copy has {source})"), lines[0]
    assert "Traceback" not in proc.stderr
