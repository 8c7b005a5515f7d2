"""The standalone Spark cluster of the tests keeps every scratch file under its own directory (a SIGKILLed driver
or executor never removes its own: 432 MB of packed environment each, 61 GB in /tmp once)."""

from pathlib import Path

from transcoder.dev.spark_cluster import StandaloneCluster


def test_drivers_and_executors_write_their_scratch_under_the_cluster(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m -XX:+UseSerialGC")
    env = StandaloneCluster(tmp_path, port=1, ui_port=2).env()
    assert env["SPARK_LOCAL_DIRS"] == str(tmp_path / "local")
    assert env["SPARK_SUBMIT_OPTS"].split() == ["-Xss4m", "-XX:+UseSerialGC", f"-Djava.io.tmpdir={tmp_path / 'local'}"]
    executor = StandaloneCluster(tmp_path, port=1, ui_port=2).executor_conf()["spark.executor.extraJavaOptions"]
    assert executor.split()[-1] == f"-Djava.io.tmpdir={tmp_path / 'local'}"


def test_stop_removes_the_scratch_and_keeps_the_logs(tmp_path: Path):
    cluster = StandaloneCluster(tmp_path, port=1, ui_port=2)
    (tmp_path / "local" / "spark-1").mkdir(parents=True)
    (tmp_path / "local" / "spark-1" / "transcoder-env.tar").write_bytes(b"x")
    (tmp_path / "master.log").write_text("log")
    cluster.stop()
    assert not (tmp_path / "local").exists()
    assert (tmp_path / "master.log").read_text() == "log"
