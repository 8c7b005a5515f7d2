"""transcoder.spark.session: the driver JVM's environment."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import transcoder_native

import transcoder
from transcoder.spark.session import planner_pythonpath


def test_the_driver_jvm_gets_this_interpreters_import_roots_after_its_own():
    # spark.read: transcoder is planned in Python workers of the driver's JVM with the executors' interpreter
    # (a pack's: without transcoder on the driver's machine): the JVM's PYTHONPATH, which Spark appends, holds ours.
    paths = planner_pythonpath("/opt/a:/opt/b").split(":")
    assert paths[:2] == ["/opt/a", "/opt/b"]
    assert str(Path(transcoder.__file__).resolve().parents[1]) in paths
    assert sysconfig.get_paths()["purelib"] in paths
    assert any(Path(transcoder_native.__file__).resolve().is_relative_to(Path(p).resolve()) for p in paths)
    assert planner_pythonpath(None).split(":")[0] == str(Path(transcoder.__file__).resolve().parents[1])


def test_the_driver_jvm_resolves_the_connector_holding_the_ivy_caches_lock(tmp_path, monkeypatch):
    # Two processes resolving into one cold Ivy cache at once corrupted it (both refused the jars: 'invalid sha1'):
    # the JVM is launched (and resolves) while this process holds the cache's lock, released after.
    import fcntl

    import pytest
    from pyspark import java_gateway

    from transcoder.spark import driver_output, session

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lock = tmp_path / "transcoder" / "ivy" / "resolution.lock"

    def taken() -> bool:
        with lock.open("a") as other:  # another open file: flock conflicts with the holder's, in-process too
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(other, fcntl.LOCK_UN)
            return False

    seen = []

    def launch(conf, popen_kwargs=None):
        seen.append(taken())
        raise RuntimeError("launch stopped by the test")

    monkeypatch.setattr(java_gateway, "launch_gateway", launch)
    output = driver_output.DriverOutput()
    with pytest.raises(RuntimeError, match="stopped by the test"):
        session.start_driver({"spark.master": "local[1]"}, output)
    assert seen == [True]
    assert not taken()
