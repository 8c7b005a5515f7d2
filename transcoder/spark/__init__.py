"""The Spark engine (issue 11): the only importer of pyspark. Empty until then."""
