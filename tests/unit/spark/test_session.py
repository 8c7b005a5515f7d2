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
