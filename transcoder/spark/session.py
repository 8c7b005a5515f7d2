"""The SparkSession of the Spark engine: Spark's Kafka connector resolved from Maven Central (through
Ivy, into the cache), the config's master and settings, and one-line errors for what is missing."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog

from transcoder.config import SparkConfig
from transcoder.errors import ConfigError, SparkUnavailableError, TranscoderError
from transcoder.spark import driver_output

#: Spark 4's Scala version: the connector's artifact carries it in its name.
SCALA_VERSION = "2.13"

log = structlog.get_logger("transcoder.spark")


def connector_coordinates(pyspark_version: str) -> str:
    """Maven coordinates of Spark's Kafka connector for this pyspark (Spark does not mix versions)."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_VERSION}:{pyspark_version}"


def connector_jar(version: str) -> Path:
    """Where Ivy leaves the connector's jar once resolved."""
    return ivy_dir() / "jars" / f"org.apache.spark_spark-sql-kafka-0-10_{SCALA_VERSION}-{version}.jar"


def ivy_dir() -> Path:
    """Where Ivy keeps the connector's jars: the project's cache (resolved once, then offline)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "transcoder" / "ivy"


#: Ivy settings that resolve from Maven Central only (Spark's default chain also asks spark-packages.org).
_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="https://repo1.maven.org/maven2/"/>
  </resolvers>
</ivysettings>
"""


@contextmanager
def ivy_lock() -> Iterator[None]:
    """Held while this process's driver JVM starts (it resolves the connector into ivy_dir() then): Ivy's cache is not
    safe for two resolutions at once. Two processes starting Spark on a cold cache downloaded the same jars into it
    together and both refused them ('invalid sha1', 28 Spark tests of a fresh-clone CI run); the second now waits and
    finds them resolved. An exclusive lock on a file beside the cache (flock: the kernel drops it with the process)."""
    path = ivy_dir() / "resolution.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def ivy_settings() -> Path:
    """The Ivy settings file (written once into the cache): Maven Central, the cache under ivy_dir()."""
    path = ivy_dir() / "ivysettings.xml"
    text = _IVY_SETTINGS.format(cache=ivy_dir() / "cache")
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = path.with_name(f"{path.name}.{os.getpid()}")  # whole or not at all for another process reading it
        written.write_text(text)
        written.replace(path)
    return path


def pyspark_version() -> str:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        raise ConfigError("the Spark engine needs pyspark: pip install 'transcoder[spark]'") from None


def under_spark_submit() -> bool:
    """True when spark-submit (or spark-operator, through it) started this driver: its --master and
    --packages are already in the JVM's configuration, and win over the config's."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def worker_python(spark: SparkConfig, *, submitted: bool, environ: Mapping[str, str]) -> str | None:
    """The Python the executors' workers run, to be set as PYSPARK_PYTHON before the session is built (None: leave
    it). A driver started from Python reads only PYSPARK_PYTHON (pyspark's SparkContext), so `spark.pyspark.python`
    in the config's `spark.conf`, which spark-submit turns into that variable, is turned into it here too: it wins,
    as Spark documents. Else, for a local master, this interpreter (pyspark's default is `python3` on the PATH, which
    may not have transcoder and its clients), unless PYSPARK_PYTHON is set already."""
    given = spark.conf.get("spark.pyspark.python")
    if given is not None:
        return str(given)
    if not submitted and spark.master.startswith("local") and "PYSPARK_PYTHON" not in environ:
        return sys.executable
    return None


#: Spark's own default spark.redaction.regex (SparkConf in the UI and event logs, and option values in plans: a key
#: or a value it matches is hidden), and JAAS configs (`kafka.sasl.jaas.config` carries the SASL password).
REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|jaas"
#: Source and sink options whose values plans and the UI hide (Spark's default is `(?i)url` only; `keystore`: the
#: client key and certificate of mTLS, given by value).
OPTIONS_REDACTION_REGEX = r"(?i)url|jaas|password|secret|token|keystore"
_REDACTION = {"spark.redaction.regex": REDACTION_REGEX, "spark.sql.redaction.options.regex": OPTIONS_REDACTION_REGEX}


def settings(spark: SparkConfig, *, app_name: str, version: str, submitted: bool = False) -> dict[str, str]:
    """Every setting the session is built with; the config's own `conf` last (it may not set the master or
    the connector: the config model refuses those keys). Under spark-submit, its master and packages stay."""
    own = {} if submitted else {
        "spark.master": spark.master,
        "spark.jars.packages": connector_coordinates(version),
        "spark.jars.ivy": str(ivy_dir()),
        "spark.jars.ivySettings": str(ivy_settings()),
        # A local master talks to itself on loopback only (this host's name may resolve elsewhere).
        **({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
           if spark.master.startswith("local") else {}),
    }
    out = {
        "spark.app.name": app_name,
        **own,
        "spark.ui.showConsoleProgress": "false",
        **_REDACTION,
        **{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark.conf.items()},
    }
    # A config's own redaction pattern widens transcoder's, never narrows it: the secrets stay hidden.
    for key, ours in _REDACTION.items():
        if out[key] != ours:
            out[key] = f"{ours}|(?:{out[key]})"
    return out


def build(spark: SparkConfig, *, app_name: str = "transcoder", connector_version: str | None = None) -> Any:
    """A SparkSession (pyspark.sql.SparkSession) with the Kafka connector on its class path.

    One line and a non-zero exit (TranscoderError) for: pyspark missing, Java missing, the connector not
    resolvable from Maven Central (its coordinates named), Spark not starting (the reason Spark logged, e.g. a
    master that does not answer, and the file holding the driver's output meanwhile: driver_output).
    """
    version = connector_version or pyspark_version()
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ConfigError("the Spark engine needs Java 17 or newer: no `java` on the PATH and JAVA_HOME is not set")
    from pyspark.sql import SparkSession

    submitted = under_spark_submit()
    if not submitted:
        check_reachable(spark.master)
    python = worker_python(spark, submitted=submitted, environ=os.environ)
    if python is not None:
        os.environ["PYSPARK_PYTHON"] = python
    own = settings(spark, app_name=app_name, version=version, submitted=submitted)
    builder = SparkSession.builder
    for key, value in own.items():
        builder = builder.config(key, value)
    # The driver JVM this process starts prints into a file while Spark starts (under spark-submit, spark-submit
    # started it: its output is spark-submit's)
    output = None if submitted else _driver_output()
    if output is not None:
        output.hold()
    try:
        if output is not None:
            start_driver(own, output)
        session = builder.getOrCreate()
    except Exception as exc:  # py4j and pyspark raise plain exceptions
        kept = output.release(keep=True) if output is not None else None
        log_line = f"; Spark's log: {kept}" if kept is not None else ""
        coordinates = connector_coordinates(version)
        if not connector_jar(version).exists():  # Ivy could not fetch it: spark-submit exits at once
            raise TranscoderError(f"cannot resolve Spark's Kafka connector {coordinates} from Maven Central (Ivy "
                                  f"cache {ivy_dir()}); pin pyspark to a version whose connector is published "
                                  f"there{log_line}") from exc
        unanswered = driver_output.reason_in(kept)  # the master did not take the application: Spark unavailable
        kind = SparkUnavailableError if unanswered is not None else TranscoderError
        raise kind(f"cannot start Spark (master {spark.master}): {unanswered or java_failure(exc)}{log_line}") from exc
    if output is not None:
        output.release(keep=False)  # started: what it printed meanwhile is Ivy's and Spark's start-up chatter
    session.sparkContext.setLogLevel("WARN")
    return session


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """The host:port pairs of a standalone master URL (`spark://h:p` or, with standby masters, `spark://h1:p1,h2:p2`);
    none for other masters (local, yarn, k8s)."""
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master.removeprefix("spark://").split(","):
        host, _, port = part.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def check_reachable(master: str, timeout: float = 5.0) -> None:
    """A standalone master none of whose addresses accepts a connection is one line at once (Spark itself would
    retry its registration 3 x 20 s, then say 'All masters are unresponsive'), with the reason of each address."""
    addresses = standalone_masters(master)
    failures = []
    for host, port in addresses:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc.strerror or exc}")
    if failures:
        raise SparkUnavailableError(f"cannot start Spark (master {master}): no master answers "
                                    f"({'; '.join(failures)})")


#: The driver JVM this process launched (pyspark keeps one JVM per process, for every later session) and its output.
_DRIVER: list[driver_output.DriverOutput] = []


def _driver_output() -> driver_output.DriverOutput:
    """The output of the driver JVM this process launched, or is about to launch (the first session)."""
    if not _DRIVER:
        _DRIVER.append(driver_output.DriverOutput())
    return _DRIVER[0]


def planner_pythonpath(existing: str | None) -> str:
    """The driver JVM's PYTHONPATH: `existing`, then where this interpreter imports transcoder, its compiled module
    and their dependencies from. spark.read: transcoder's data source is planned (its offsets, its ranges) in Python
    workers the driver's JVM starts on the driver's machine with the executors' interpreter (`spark.pyspark.python`,
    pyspark's pythonExec) and the executors' environment, to which Spark appends the JVM's own PYTHONPATH: an
    executors' Python without transcoder on this machine (the workers get it from `transcoder spark pack`'s archive,
    which the driver's machine does not unpack) still plans with this interpreter's packages."""
    import sysconfig

    import transcoder

    paths = sysconfig.get_paths()
    roots = [str(Path(transcoder.__file__).resolve().parents[1]), paths["purelib"], paths["platlib"]]
    return os.pathsep.join(dict.fromkeys([*(p for p in (existing or "").split(os.pathsep) if p), *roots]))


def start_driver(own: Mapping[str, str], output: driver_output.DriverOutput) -> None:
    """The first session of this process: launch the driver JVM with its output into `output`'s pipe (holding
    ivy_lock while it resolves the connector), and start the SparkContext on it (SparkSession.builder takes it).
    Later sessions use that JVM: the builder starts them."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if output.launched:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(own.items()))
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = planner_pythonpath(before)  # the JVM's environment, which pyspark copies
    try:
        with ivy_lock():
            gateway = launch_gateway(conf, popen_kwargs=output.popen_kwargs())
    finally:
        output.close_write_end()
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    SparkContext(conf=conf, gateway=gateway)


#: Spark's words when a Python worker it started did not connect back within its fixed 10 s (PythonWorkerFactory):
#: the streaming source runner of `spark.read: transcoder` is such a worker, started with each query
_WORKER_SLOW_TO_START = "Python worker failed to connect back"


def transient_start_failure(failure: str) -> bool:
    """Pure: whether a query's failure (java_failure's line) is Spark giving up on a Python worker that was slow to
    start (a busy driver), which a new start of the query from its checkpoint gets past."""
    return _WORKER_SLOW_TO_START in failure


def starting(message: str) -> bool:
    """Pure: whether a streaming query's status message (StreamingQuery.status) says it is still bringing its
    sources up: initializing them, or asking them for their first offsets."""
    return message == "Initializing sources" or message.startswith("Getting offsets from")


def java_failure(exc: BaseException) -> str:
    """One line for an error raised through py4j: the first line of the JVM exception, and of its root cause
    (e.g. Spark's 'Some data may have been lost...' and Kafka's 'Fetch position ... is out of range for
    partition src-0')."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    lines: list[str] = []
    cause = getattr(exc, "_cause", None)
    if java is None and cause is not None:  # a query's StreamingQueryException
        desc = (str(getattr(exc, "_desc", "") or "").strip().splitlines() or [""])[0]
        lines = [desc] if desc else []
        java = getattr(cause, "_origin", None)
    try:
        while java is not None and len(lines) < 10:
            message = java.getMessage()
            name = java.getClass().getSimpleName()
            first = (str(message).strip().splitlines() or [""])[0].split(";")[0] if message else ""
            lines.append(f"{name}: {first}" if first else name)
            java = java.getCause()
    except Exception:  # the JVM may be gone; the Python text below still says something
        log.debug("java_failure_unreadable", exc_info=True)
    if not lines:
        text = str(exc).strip().splitlines()
        return text[0] if text else type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} (cause: {lines[-1]})"
