"""The Spark engine (`transcoder run --engine spark`, `transcoder evaluate --engine spark`): the only importer of
pyspark.

`engine` is the driver of a run: pre-flight and provisioning as the service does them, one streaming query per
lane, metrics, health and /status. `sink` is the executor side: each task writes its records through the project's
writer. `source` holds the options of Spark's Kafka source, `session` the SparkSession with Spark's Kafka connector,
`checkpoints` each lane's checkpoint directory and the mark that refuses a checkpoint written for other topics.
`evaluate` spreads evaluate's measuring over the executors.
May import: transcoder.migrate and below (the layers in pyproject.toml).
"""
