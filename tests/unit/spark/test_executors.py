"""The executors' pre-flight: what one probe task reports, and the one line made of the reports."""

from __future__ import annotations

from transcoder.spark.executors import Report, driver_versions, probe, verdict

DRIVER = (("transcoder", "0.1.0"), ("transcoder-native", "0.1.0"))


def test_the_probe_in_this_interpreter_reports_the_drivers_versions():
    [row] = list(probe(iter([0])))
    report = Report(*row)
    assert report.error is None and report.versions == driver_versions()
    assert verdict([report], driver_versions()) is None


def test_an_executor_that_cannot_import_is_named_with_its_python_and_how_to_ship():
    ok = Report("h1", "/venv/bin/python", "3.11.7", DRIVER, None)
    bare = Report("h2", "/usr/bin/python3", "3.11.2", (), "ModuleNotFoundError: No module named 'transcoder'")
    line = verdict([ok, bare], DRIVER)
    assert line == ("the executors cannot import transcoder: executor on h2 (Python 3.11.2 at /usr/bin/python3): "
                    "ModuleNotFoundError: No module named 'transcoder'; ship it with `transcoder spark pack` (a packed "
                    "environment for spark.archives; it prints the settings) or run the image of deploy/spark/")
    assert "\n" not in line


def test_other_versions_on_an_executor_are_refused():
    old = Report("h3", "/opt/py", "3.11.7", (("transcoder", "0.0.9"), ("transcoder-native", "0.1.0")), None)
    line = verdict([old], DRIVER)
    assert line is not None and line.startswith(
        "the executors run other versions than the driver: executor on h3 (Python 3.11.7 at /opt/py) has "
        "transcoder 0.0.9, transcoder-native 0.1.0, the driver transcoder 0.1.0, transcoder-native 0.1.0; ")
