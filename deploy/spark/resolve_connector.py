"""Build step of deploy/spark/Dockerfile: Spark's Kafka connector into the image's Ivy cache.

Pods then start without Maven Central. Both ways the connector reaches the class path resolve into
one directory, transcoder's Ivy cache ($XDG_CACHE_HOME/transcoder/ivy):

1. `transcoder run --engine spark` builds its own session (transcoder.spark.session: the connector at
   pyspark's version, transcoder's ivysettings.xml, Maven Central only);
2. `spark-submit --packages` (spark-operator's driver pod): Spark's default resolvers, Ivy's directory
   from -Divy.home in SPARK_SUBMIT_OPTS, which the image sets (checked here).

Each way ends by looking up Spark's `kafka` data source: a connector that does not load fails the
build. With `--check`, this file is the application step 2 submits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def check_kafka_source(spark: Any) -> None:
    """SystemExit unless Spark finds its Kafka data source (the connector's jars on the class path)."""
    data_source = spark._jvm.org.apache.spark.sql.execution.datasources.DataSource
    conf = spark._jsparkSession.sessionState().conf()
    found = data_source.lookupDataSource("kafka", conf).getName()
    if found != KAFKA_PROVIDER:
        raise SystemExit(f"Spark's `kafka` data source is {found}, not {KAFKA_PROVIDER}")
    print(f"kafka data source: {found}")


def submitted_check() -> None:
    """Step 2's application, run by spark-submit: its --packages are already on the class path."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    try:
        check_kafka_source(spark)
    finally:
        spark.stop()


def resolve() -> None:
    from transcoder.config import SparkConfig
    from transcoder.spark import session

    ivy = session.ivy_dir()
    submit_opts = os.environ.get("SPARK_SUBMIT_OPTS", "").split()
    if f"-Divy.home={ivy}" not in submit_opts:
        raise SystemExit(f"SPARK_SUBMIT_OPTS must hold -Divy.home={ivy} (transcoder's Ivy cache), for "
                         f"spark-submit --packages to resolve from it; it holds {submit_opts}")
    version = session.pyspark_version()
    coordinates = session.connector_coordinates(version)

    # 1. As `transcoder run --engine spark` does.
    spark = session.build(SparkConfig(master="local[1]"), app_name="transcoder-image-build")
    try:
        check_kafka_source(spark)
    finally:
        spark.stop()

    # 2. As spark-submit does in a driver pod.
    import pyspark

    spark_home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    subprocess.run([f"{spark_home}/bin/spark-submit", "--master", "local[1]", "--packages", coordinates,
                    "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                    "--conf", "spark.ui.enabled=false", __file__, "--check"], env=env, check=True)

    jar = session.connector_jar(version)
    if not jar.is_file():
        raise SystemExit(f"{coordinates} resolved, but {jar} is missing")
    jars = sorted(p.name for p in (ivy / "jars").glob("*.jar"))
    print(f"{coordinates} and its dependencies in {ivy / 'jars'}: {', '.join(jars)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        submitted_check()
    else:
        resolve()
