"""The Spark engine's entry file for spark-submit (and spark-operator's SparkApplication):

    spark-submit --master URL --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version> \\
        .../transcoder/cli/spark_submit.py --config config.yaml [--until-caught-up]

It is `transcoder run --engine spark` with the same options; spark-submit's master and packages apply.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from transcoder.cli import main as cli

    cli(["run", "--engine", "spark", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
