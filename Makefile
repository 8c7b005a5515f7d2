# Task runner. `make test` and `make demo` work on a fresh machine: they build what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Test processes of `make test` (pytest-xdist), each with its own broker (Spark's tests all in one of them, the
# legacy ones in another); 0: one process, no xdist. On a 2-core machine 4 took 17-18 min of tests in fresh-clone
# runs (2026-11-28; 18-20 min with .ci/run's set-up).
TEST_WORKERS ?= 4

.PHONY: venv kafka-jars lint test unit demo bench clean

venv: $(STAMP)

# The venv is rebuilt when the declared or pinned dependencies change, or the compiled hot path's sources (native/:
# Rust, built by cargo through maturin; crates from crates.io, maturin from PyPI).
$(STAMP): pyproject.toml constraints.txt native/pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt ./native -e '.[dev,spark]'
	touch $@

# Apache Kafka from Maven Central into ~/.cache/transcoder (once; later runs take no network).
kafka-jars: venv
	$(BIN)/transcoder local-kafka fetch

# The package's import rules (pyproject.toml [tool.importlinter]): layers, no Kafka client in pure code,
# prometheus_client in one module, pyspark only in transcoder.spark, no import circles; then ruff ([tool.ruff]), then
# mypy ([tool.mypy]: the package, strict on pipeline, service, kafka and config).
lint: venv
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/mypy

# The whole suite, in two pytest sessions. First the import rules, unit tests, integration tests against a real broker
# the session starts, and legacy sources (tests/legacy: ZooKeeper + Kafka 3.9 storing message format v1, copied to a
# modern broker; Kafka 3.9 is fetched from Maven Central into ~/.cache/transcoder on first use); in TEST_WORKERS
# processes (pytest-xdist; 0: one) each with a broker of its own, the Spark tests that share a SparkSession in one of
# them, the legacy ones in one, the standalone Spark cluster's in one. A test process that dies (a native abort) ends
# the run, the test named: with a replacement process, loadgroup's scheduler left every process idle and the run hung
# (fresh-clone CI of 36ffbdc). Then tests/cluster, which that run leaves out: one process, one local 3-node KRaft
# cluster for the session (three JVMs would not fit beside four test processes on 2 cores). Its budget in CI is 7
# minutes (start-up and the smoke tests: 40-50 s); past 8 (--session-timeout, checked between tests) it stops and
# fails, saying so, rather than stretch the run. The second session runs even when the first failed; the target
# fails when either did.
test: venv kafka-jars lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --max-worker-restart 0 --ignore=tests/cluster; \
	main=$$?; $(BIN)/python -m pytest tests/cluster --session-timeout 480; cluster=$$?; \
	[ $$main -eq 0 ] && [ $$cluster -eq 0 ]

# Start a local Kafka, seed 250 MB of nginx access logs, copy them into one topic per codec,
# print the measured comparison and stop the broker.
demo: venv kafka-jars
	$(BIN)/transcoder demo

# transcoder vs MirrorMaker 2 vs kcat on one broker (see docs/benchmarks.md); BENCH_ARGS, e.g.
# BENCH_ARGS="--from-file my.ndjson --count 500000 --codecs lz4,zstd".
bench: venv kafka-jars
	$(BIN)/python -m bench $(BENCH_ARGS)

unit: venv
	$(BIN)/python -m pytest tests/unit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache build *.egg-info native/target
