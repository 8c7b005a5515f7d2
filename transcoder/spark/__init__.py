"""The Spark engine (issue 11, under way): the only importer of pyspark.

So far: the SparkSession with Spark's Kafka connector pinned to pyspark's version (`session`) and the
Kafka source options from the shared config (`source`). `transcoder run --engine spark` does not exist yet.
May import: transcoder.metrics and below.
"""
