"""Test-only: a legacy source cluster — ZooKeeper plus one Kafka 3.x broker in ZooKeeper mode that stores
every topic in the old message format (magic v1 message sets, Kafka 0.10.x), for the tests/legacy session.

Why these settings: Kafka 3.x ignores `log.message.format.version` once `inter.broker.protocol.version`
is 3.0 or newer (KIP-724), and KRaft needs IBP >= 3.0, so the broker runs in ZooKeeper mode with IBP 2.8.
Clients still speak today's protocol and produce v2 batches; the broker converts them to magic v1 on
append, keeping the producer's codec (compression.type=producer). The jars come from Maven Central into
~/.cache/transcoder/legacy-kafka/<version> (transcoder.dev.kafka_jars.resolve_jars), never into git.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from transcoder.dev.kafka_jars import SLF4J_VERSION, default_cache_dir, resolve_jars
from transcoder.dev.ports import free_port

#: The last Kafka line with ZooKeeper mode (4.0 removed it) and so with message format v0/v1 on disk.
LEGACY_VERSION = "3.9.1"
#: The broker's message format: 0.10.2 stores magic v1 (timestamps, no headers, gzip/snappy/lz4, no zstd).
MESSAGE_FORMAT = "0.10.2"
#: Below 3.0, or the broker ignores MESSAGE_FORMAT (KIP-724); 2.8 is the newest such IBP.
INTER_BROKER_PROTOCOL = "2.8"

_LOG4J = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
"""


def fetch(version: str = LEGACY_VERSION) -> Path:
    """The directory of the broker's jars (ZooKeeper comes with kafka_2.13 3.x), resolved once with Maven."""
    return resolve_jars(default_cache_dir() / "legacy-kafka" / version / "libs",
                        [f"org.apache.kafka:kafka_2.13:{version}", f"org.slf4j:slf4j-reload4j:{SLF4J_VERSION}"],
                        what=f"Kafka {version} (legacy source broker)")


class LegacyKafka:
    """ZooKeeper and one ZooKeeper-mode broker storing `message_format` (magic v1 by default), in `state_dir`;
    `up`, then `down`."""

    def __init__(self, state_dir: Path, *, version: str = LEGACY_VERSION, message_format: str = MESSAGE_FORMAT,
                 inter_broker_protocol: str = INTER_BROKER_PROTOCOL) -> None:
        self.state_dir = state_dir
        self.version, self.message_format, self.inter_broker_protocol = version, message_format, inter_broker_protocol
        self.bootstrap = ""
        self._procs: list[subprocess.Popen] = []
        self._classpath = os.path.join(fetch(version), "*")
        self._log4j = f"-Dlog4j.configuration=file:{state_dir / 'log4j.properties'}"

    def __repr__(self) -> str:
        return f"LegacyKafka({self.bootstrap or 'down'}, Kafka {self.version}, message format {self.message_format})"

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "kafka-data"

    @property
    def broker_log(self) -> Path:
        return self.state_dir / "broker.log"

    def up(self, timeout: float = 90.0) -> LegacyKafka:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "log4j.properties").write_text(_LOG4J)
        zk_port, port = free_port(), free_port()

        zoo = self.state_dir / "zoo.cfg"
        zoo.write_text(f"dataDir={self.state_dir / 'zk-data'}\nclientPort={zk_port}\nclientPortAddress=127.0.0.1\n"
                       "tickTime=500\nadmin.enableServer=false\nmaxClientCnxns=0\n")
        self._spawn("zookeeper.log", "-Xmx128m", "org.apache.zookeeper.server.ZooKeeperServerMain", str(zoo))

        props = {
            "broker.id": "0",
            "zookeeper.connect": f"127.0.0.1:{zk_port}",
            "zookeeper.connection.timeout.ms": "30000",
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(self.data_dir),
            "inter.broker.protocol.version": self.inter_broker_protocol,
            "log.message.format.version": self.message_format,
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "log.cleaner.backoff.ms": "1000",
        }
        config = self.state_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.bootstrap = f"127.0.0.1:{port}"
        try:
            self._spawn("broker.log", "-Xmx512m", "kafka.Kafka", str(config))
            self._wait_ready(timeout)
        except BaseException:
            self.down()
            raise
        return self

    def _spawn(self, log_name: str, heap: str, main: str, *args: str) -> None:
        with (self.state_dir / log_name).open("ab") as log:
            proc = subprocess.Popen(
                [shutil.which("java") or "java", heap, "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Djava.awt.headless=true", self._log4j, "-cp", self._classpath, main, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._procs.append(proc)

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        while True:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"legacy Kafka: {proc.args[-2]} exited with {proc.returncode} during "
                                       f"start-up (logs in {self.state_dir})")
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"legacy Kafka at {self.bootstrap} did not answer within {timeout:.0f}s "
                                   f"(log: {self.broker_log})")
            time.sleep(0.3)

    def down(self) -> None:
        """Stop the broker, then ZooKeeper (only the processes `up` started)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self._procs = []

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        return sorted((self.data_dir / f"{topic}-{partition}").glob("*.log"))

    def dump_log_segments(self, segments: list[Path]) -> dict[Path, str]:
        """Kafka's DumpLogSegments (kafka.tools.DumpLogSegments in 3.x) of segment files, in one JVM: each
        file's output."""
        if not segments:
            return {}
        cmd = [shutil.which("java") or "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", self._log4j, "-cp",
               self._classpath, "kafka.tools.DumpLogSegments", "--files", ",".join(map(str, segments))]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"DumpLogSegments failed on {segments}: {proc.stderr.strip()[-500:]}")
        out: dict[Path, str] = {}
        current: Path | None = None
        for line in proc.stdout.splitlines(keepends=True):
            if line.startswith("Dumping "):
                current = Path(line.removeprefix("Dumping ").strip())
            if current is not None:
                out[current] = out.get(current, "") + line
        return out

    def stored_batches(self, topics: list[str], partitions: int) -> dict[tuple[str, int], list[dict[str, str]]]:
        """Per (topic, partition), one dict per stored batch as DumpLogSegments prints it: for magic v0/v1
        one line per wrapper message (`offset:` its last inner offset) or per uncompressed message; for v2
        one per record batch (`baseOffset:`)."""
        where = {seg: (t, p) for t in topics for p in range(partitions) for seg in self.segment_files(t, p)}
        out: dict[tuple[str, int], list[dict[str, str]]] = {(t, p): [] for t in topics for p in range(partitions)}
        for seg, text in self.dump_log_segments(list(where)).items():
            for line in text.splitlines():
                if line.startswith(("offset:", "baseOffset:")):
                    out[where[seg]].append(dict(re.findall(r"(\w+): (\S+)", line)))
        return out
