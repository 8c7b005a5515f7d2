"""The Kafka cluster the tests talk to, as the session's `kafka` fixture hands it out."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from transcoder.dev.local_kafka import LocalKafka


@dataclass
class Cluster:
    """The cluster tests talk to; `local` is set when this session started the broker itself."""

    bootstrap: str
    local: LocalKafka | None

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        """Stored .log segment files of one partition; needs the broker this session started."""
        if self.local is None:
            pytest.skip("reading stored segments needs the session's own broker, not TRANSCODER_TEST_BOOTSTRAP")
        st = self.local.state()
        assert st is not None, "the session's broker is not running"
        return sorted((Path(st.data_dir) / f"{topic}-{partition}").glob("*.log"))

    def stored_batches(self, topic: str, partition: int) -> list[dict[str, str]]:
        """One dict per stored record batch, as Kafka's DumpLogSegments describes it."""
        assert self.local is not None
        batches = []
        for seg in self.segment_files(topic, partition):
            for line in self.local.dump_log_segment(seg).splitlines():
                if line.startswith("baseOffset:"):
                    batches.append(dict(re.findall(r"(\w+): (\S+)", line)))
        return batches

    def throttle_producer(self, client_id: str, bytes_per_second: int | None) -> None:
        """Set (or, with None, remove) a broker quota on a producer client.id, with Kafka's ConfigCommand."""
        if self.local is None:
            pytest.skip("throttling a client needs the session's own broker")
        st = self.local.state()
        assert st is not None
        change = (["--add-config", f"producer_byte_rate={bytes_per_second}"] if bytes_per_second
                  else ["--delete-config", "producer_byte_rate"])
        proc = subprocess.run(["java", "-cp", st.classpath, "kafka.admin.ConfigCommand", "--bootstrap-server",
                               self.bootstrap, "--alter", *change, "--entity-type", "clients", "--entity-name",
                               client_id], capture_output=True, text=True, timeout=60)
        # Removing a quota that is not set fails in ConfigCommand; removal is meant to be idempotent.
        if proc.returncode != 0 and (bytes_per_second or "Invalid config" not in proc.stdout + proc.stderr):
            raise AssertionError(f"ConfigCommand failed: {proc.stdout} {proc.stderr}")
