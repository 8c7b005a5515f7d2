"""The Kafka cluster the tests talk to, as the session's `kafka` fixture hands it out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from transcoder.dev.local_kafka import LocalKafka
from transcoder.kafka.protocol import RawClient


@dataclass
class Cluster:
    """The cluster tests talk to; `local` is set when this session started the broker itself."""

    bootstrap: str
    local: LocalKafka | None
    #: clients bootstrapping here reach the broker through the session's proxy (the broker_proxy fixture)
    proxied_bootstrap: str | None = None
    #: The secured listeners of the session's own broker: SASL_SSL with SCRAM-SHA-512, and SSL requiring a
    #: client certificate (mTLS); None with TRANSCODER_TEST_BOOTSTRAP.
    sasl_ssl_bootstrap: str | None = None
    ssl_bootstrap: str | None = None
    ca_file: Path | None = None  # the CA that signed the broker and client certificates (PEM)
    client_cert_file: Path | None = None
    client_key_file: Path | None = None  # PKCS#8 PEM, encrypted with the password in client_key_password_file
    client_key_password_file: Path | None = None
    sasl_username: str | None = None
    sasl_password_file: Path | None = None

    @property
    def sasl_password(self) -> str:
        assert self.sasl_password_file is not None
        return self.sasl_password_file.read_text().strip()

    def require_secured(self) -> None:
        if self.sasl_ssl_bootstrap is None:
            pytest.skip("secured listeners need the session's own broker, not TRANSCODER_TEST_BOOTSTRAP")

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
        """Set (or, with None, remove) a broker quota on a producer client.id: the AlterClientQuotas request that
        kafka-configs.sh sends (a JVM per call cost ~4 CPU s; this, ~0.1)."""
        if self.local is None:
            pytest.skip("throttling a client needs the session's own broker")
        client = RawClient({"bootstrap.servers": self.bootstrap})
        try:
            client.alter_client_quota(client_id, "producer_byte_rate", bytes_per_second)
        finally:
            client.close()
