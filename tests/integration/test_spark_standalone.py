"""The Spark engine on a standalone cluster: a master and two 1-core workers started from pyspark's own jars, whose
Python (`python3.X` on the PATH) lacks transcoder. The executors get it from `transcoder spark pack`'s archive
through spark.archives; without it the pre-flight refuses in one line. Workers and drivers are SIGKILLed mid-copy."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.configs import raw_config
from tests.support.faults import compare_topics
from transcoder.dev.spark_cluster import StandaloneCluster
from transcoder.errors import ConfigError
from transcoder.kafka.admin import describe, end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark-cluster")]

#: the workers' own Python, of the driver's version, without transcoder
PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"
#: records of the fault test: at the throttle's ~1,300 records/s, kills land mid-copy
RECORDS = 24_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield c.start(workers=2)
    finally:
        c.stop()


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> dict[str, str]:
    """The settings `transcoder spark pack` prints for its archive (uncompressed: quickest to write and unpack)."""
    out = tmp_path_factory.mktemp("pack") / "transcoder-env.tar"
    proc = run_cli("spark", "pack", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    settings = dict(line.strip().split(": ", 1) for line in proc.stdout.splitlines() if line.startswith("  spark."))
    assert settings == {"spark.archives": f"{out}#transcoder-env", "spark.pyspark.python": PYTHON,
                        "spark.executorEnv.PYTHONPATH": "transcoder-env/site-packages"}
    return settings


def write_config(directory, kafka, routes: list[dict], *, name: str = "config.yaml", **extra) -> str:
    path = directory / name
    path.write_text(yaml.safe_dump(raw_config(kafka, routes, **extra)))
    return str(path)


def _spark(cluster: StandaloneCluster, tmp_path, **conf: str) -> dict:
    return {"master": cluster.url, "checkpoint_location": str(tmp_path / "checkpoints"),
            "max_offsets_per_trigger": 4000, "conf": {**cluster.executor_conf(), **conf}}


def test_executors_without_transcoder_are_refused_in_one_line(cluster, kafka, topic_factory, tmp_path):
    source = topic_factory(partitions=1)
    routes = [{"source": source, "destinations": [{"codec": "zstd"}]}]
    bare = write_config(tmp_path, kafka, routes, name="bare.yaml",
                        spark=_spark(cluster, tmp_path, **{"spark.pyspark.python": PYTHON}))
    proc = run_cli("validate", "--engine", "spark", "--config", bare, env=cluster.env())
    assert proc.returncode == ConfigError.exit_code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1, proc.stderr
    assert "the executors cannot import transcoder: executor on" in lines[0], lines[0]
    # (transcoder itself, or, where the driver's source tree is on the workers' path, its compiled module)
    assert re.search(r"No module named 'transcoder(_native)?'", lines[0]) and "transcoder spark pack" in lines[0]

    # With the pack's settings the same workers run transcoder: every copy below ships it that way.


def _dest_count(admin, topic: str) -> int:
    shape = describe(admin, topic)
    return 0 if shape is None else sum(h - lo for lo, h in end_offsets(admin, {topic: shape}).values())


def _wait_for(predicate, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_worker_sigkilled_mid_copy_and_under_exactly_once_the_driver_twice_lose_nothing(
        guarantee, cluster, packed, kafka, topic_factory, admin, tmp_path):
    """A worker SIGKILLed mid-copy (its executor and Python workers with it) while the driver goes on; under
    exactly-once the driver SIGKILLed too, twice, then run to the end: nothing lost; under exactly-once nothing
    twice (read_committed, record by record)."""
    source = topic_factory(partitions=3)
    proc = run_cli("seed", "--kind", "json-logs", "--count", str(RECORDS), "--topic", source, "-b", kafka.bootstrap,
                   "--headers")
    assert proc.returncode == 0, proc.stderr
    path = write_config(tmp_path, kafka, [{"source": source, "destinations": [{"codec": "lz4"}]}],
                        guarantee=guarantee, spark=_spark(cluster, tmp_path, **packed))
    dest = f"{source}.lz4"
    env = {**cluster.env(), "TRANSCODER_LOG_LEVEL": "info"}
    exact = guarantee == "exactly-once"
    # the driver's runs: until killed at a mark (exactly-once: twice), then to the end (--until-caught-up)
    runs = [4000, 13000, None] if exact else [None]
    kafka.throttle_producer(f"transcoder-{dest}", 500_000)  # slow enough to be killed mid-copy
    try:
        for i, kill_at in enumerate(runs):
            log = tmp_path / f"driver-{i}.log"
            last = kill_at is None
            with log.open("wb") as out:
                driver = subprocess.Popen([sys.executable, "-m", "transcoder", "run", "--engine", "spark",
                                           "--config", path, *(["--until-caught-up"] if last else [])], env=env,
                                          stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

            def copied(n: int, driver=driver, log=log) -> bool:
                assert driver.poll() is None, f"the driver ended: {log.read_text()[-3000:]}"
                return _dest_count(admin, dest) > n

            try:
                if i == 0:  # a machine lost mid-copy: the driver goes on with the other worker's executor
                    _wait_for(lambda: copied(3000), "3000 records copied")
                    cluster.kill_worker()
                    seen = _dest_count(admin, dest)
                    _wait_for(lambda seen=seen: copied(seen + 1000), "the copy going on without the killed worker")
                if last:
                    kafka.throttle_producer(f"transcoder-{dest}", None)
                    assert driver.wait(400) == 0, log.read_text()[-3000:]
                else:
                    _wait_for(lambda kill_at=kill_at: copied(kill_at), f"{kill_at} records copied")
                    assert _dest_count(admin, dest) < RECORDS, "the copy finished before the driver could be killed"
            finally:
                if driver.poll() is None:
                    os.killpg(driver.pid, signal.SIGKILL)
                    driver.wait(30)
    finally:
        kafka.throttle_producer(f"transcoder-{dest}", None)
        cluster.add_worker()  # the killed worker's place taken again, for the next test

    result = compare_topics(kafka.bootstrap, source, dest)  # read_committed, record by record
    assert result.source == RECORDS, result.summary()
    assert (result.lost, result.foreign) == (0, 0), result.summary()
    if exact:
        assert (result.duplicates, result.in_order) == (0, True), result.summary()
