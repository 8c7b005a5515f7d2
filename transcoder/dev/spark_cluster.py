"""A Spark standalone cluster from pyspark's own jars (its `spark-class`): a master and 1-core workers, each its own
process group (a worker SIGKILLed with its executor and Python workers is a machine lost), on loopback, with lean
JVMs. For the tests and the bench; pyspark is found, not imported."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from transcoder.dev.broker_process import LEAN_JVM
from transcoder.dev.ports import free_port


def spark_home() -> Path:
    """pyspark's directory: its jars, bin/spark-class and python/lib (SPARK_HOME of a pip-installed pyspark)."""
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("a standalone Spark cluster needs pyspark: pip install 'transcoder[spark]'")
    return Path(spec.origin).parent


@dataclass
class StandaloneCluster:
    base: Path
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    master: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment of the daemons, and of a driver that should reach them on loopback."""
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_JAVA_OPTS": " ".join(LEAN_JVM), "SPARK_DAEMON_MEMORY": "256m",
                "SPARK_LOG_DIR": str(self.base / "logs"), "SPARK_NO_DAEMONIZE": "1",
                # the workers' and executors' scratch (each application's copy of its files: ~0.5 GB of packed
                # dependencies per executor) under the cluster's own directory, not /tmp: a SIGKILLed executor never
                # removes its own, and `stop` removes them all
                "SPARK_LOCAL_DIRS": str(self.base / "local"),
                # a driver's own temporary files (spark-submit unpacks the packed environment of `spark.archives`
                # there: 432 MB) likewise, or each SIGKILLed driver leaves one in /tmp
                "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} "
                                     f"-Djava.io.tmpdir={self.base / 'local'}".strip()}

    def executor_conf(self) -> dict[str, str]:
        """What every executor JVM of the tests runs with (the drivers' own lean flags come from SPARK_SUBMIT_OPTS):
        lean, and its temporary files under the cluster's scratch (an executor unpacks `spark.archives` from a copy
        in java.io.tmpdir, 432 MB for the packed environment, that a SIGKILLed executor leaves behind)."""
        return {"spark.executor.extraJavaOptions": " ".join([*LEAN_JVM, f"-Djava.io.tmpdir={self.base / 'local'}"]),
                "spark.executor.memory": "512m"}

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.base / f"{name}.log", "ab") as log:  # the daemon keeps its own descriptor
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self.env(), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd=self.base)

    def start(self, workers: int = 2) -> StandaloneCluster:
        (self.base / "local").mkdir(parents=True, exist_ok=True)  # java.io.tmpdir must exist
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(self.ui_port))
        for _ in range(workers):
            self.add_worker()
        return self

    def add_worker(self) -> None:
        n = len(self.workers)
        work = self.base / f"work-{n}"
        work.mkdir(exist_ok=True)
        self.workers.append(self._spawn(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", self.url,
                                        "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                        "--webui-port", str(free_port()), "--work-dir", str(work)))
        self.wait_alive(sum(1 for w in self.workers if w.poll() is None))

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as resp:
            return json.loads(resp.read())

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def wait_alive(self, n: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() != n:
            assert self.master is not None and self.master.poll() is None, (self.base / "master.log").read_text()
            assert time.monotonic() < deadline, f"{n} workers not alive within {timeout} s: {self.state()}"
            time.sleep(0.3)

    def kill_worker(self) -> None:
        """SIGKILL the first live worker with everything it started (its executor JVM and their Python workers)."""
        worker = next(w for w in self.workers if w.poll() is None)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(30)

    def stop(self) -> None:
        for p in [*self.workers, self.master]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)
        if (self.base / "local").exists():  # nothing runs there any more; the logs are kept
            shutil.rmtree(self.base / "local")
