"""Whether the executors can run transcoder: a pre-flight job whose tasks import transcoder and its compiled module on
the executors' Python workers and report their versions, compared with the driver's.

On `local[N]` the workers run this interpreter and always can. On a cluster they run whatever Python the workers
have (`spark.pyspark.python`, else PYSPARK_PYTHON, else `python3` on the worker's PATH); without this check a missing
package shows up as every task failing `spark.task.maxFailures` times with `ModuleNotFoundError` in a JVM trace.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from transcoder.spark import session

#: the distributions the executors need at the driver's version
DISTRIBUTIONS = ("transcoder", "transcoder-native")

SHIP_HINT = ("ship it with `transcoder spark pack` (a packed environment for spark.archives; it prints the settings) "
             "or run the image of deploy/spark/")


@dataclass(frozen=True)
class Report:
    """What one probe task saw on its executor."""

    host: str
    python: str
    python_version: str
    versions: tuple[tuple[str, str], ...]  # (distribution, version); empty when the import failed
    error: str | None


def probe(_: Any) -> Any:
    """The task (pickled by value: it must not need transcoder to be unpickled). Yields one tuple per task."""
    import platform
    import socket
    import sys as worker_sys
    from importlib import metadata as worker_metadata

    head = (socket.gethostname(), worker_sys.executable, platform.python_version())
    try:
        import transcoder_native  # noqa: F401

        import transcoder  # noqa: F401

        versions = tuple((d, worker_metadata.version(d)) for d in ("transcoder", "transcoder-native"))
    except Exception as exc:  # noqa: BLE001 - ImportError, a broken native module, no metadata: reported, not raised
        yield (*head, (), f"{type(exc).__name__}: {exc}")
        return
    yield (*head, versions, None)


def driver_versions() -> tuple[tuple[str, str], ...]:
    return tuple((d, metadata.version(d)) for d in DISTRIBUTIONS)


def verdict(reports: list[Report], driver: tuple[tuple[str, str], ...]) -> str | None:
    """None when every executor imports transcoder at the driver's versions; else one line naming the first that
    cannot, what it ran and how to ship the package."""
    for r in reports:
        where = f"executor on {r.host} (Python {r.python_version} at {r.python})"
        if r.error is not None:
            return f"the executors cannot import transcoder: {where}: {r.error}; {SHIP_HINT}"
        if r.versions != driver:
            have = ", ".join(f"{d} {v}" for d, v in r.versions)
            want = ", ".join(f"{d} {v}" for d, v in driver)
            return (f"the executors run other versions than the driver: {where} has {have}, the driver {want}; "
                    + SHIP_HINT)
    return None


def check(spark: Any) -> str | None:
    """Run the probe on as many tasks as the application has cores (every executor, as far as Spark spreads them);
    None when all can run transcoder, else one line (a task that could not even start its Python worker included)."""
    import pyspark.cloudpickle

    module = sys.modules[__name__]
    context = spark.sparkContext
    tasks = max(1, context.defaultParallelism)
    pyspark.cloudpickle.register_pickle_by_value(module)  # the executors may lack transcoder: the probe travels whole
    try:
        rows = context.parallelize(range(tasks), tasks).mapPartitions(probe).collect()
    except Exception as exc:  # noqa: BLE001 - py4j/pyspark: a worker that could not start (another Python, none)
        return f"the executors cannot run transcoder's Python tasks: {session.java_failure(exc)}; {SHIP_HINT}"
    finally:
        pyspark.cloudpickle.unregister_pickle_by_value(module)
    return verdict([Report(*row) for row in rows], driver_versions())
