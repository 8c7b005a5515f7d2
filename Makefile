# Task runner. `make test` and `make demo` work on a fresh machine: they build what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Test processes of `make test` (pytest-xdist), each with its own broker (Spark's tests all in one of them, the
# legacy ones in another); 0: one process, no xdist. On a 2-core machine 4 took 21:19 of tests in a fresh-clone run
# (2026-11-29) with the machine 60% busy; 5 took 19:53 and 22:35 in two runs, its load average at 8-11 and 3 tests
# failing on starvation in the second: 4 it stays.
TEST_WORKERS ?= 4

# The compiled hot path's wheel (native/: Rust, built by cargo through maturin; crates from crates.io, maturin from
# PyPI), built once into dist/ and installed from there by `venv`; `dist` adds transcoder's own wheel beside it.
NATIVE_WHEEL := dist/.native-wheel
NATIVE_SOURCES := native/pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)

.PHONY: venv dist kafka-jars lint test unit demo bench clean

venv: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# One abi3 wheel (CPython >= 3.11), rebuilt when native/'s sources change (cargo reuses native/target/ for what did
# not). `--compatibility pypi`: tagged manylinux_2_X, X the newest glibc symbol version it links, as maturin reads
# them (manylinux_2_34 built on Debian 12), and refused if it links a library manylinux does not allow; under pip,
# maturin's default is the bare linux tag, which pip installs only where it was built. 80 s on 2 cores from cold.
$(NATIVE_WHEEL): $(NATIVE_SOURCES) | $(BIN)/python
	mkdir -p dist
	rm -f dist/transcoder_native-*.whl
	$(BIN)/pip wheel -q --no-deps --config-settings 'build-args=--compatibility pypi' -w dist ./native
	touch $@

# The venv is rebuilt when the declared or pinned dependencies change, or native/'s wheel. That wheel is installed
# again even at the same version (its sources changed), then transcoder editable with its extras.
$(STAMP): pyproject.toml constraints.txt $(NATIVE_WHEEL)
	$(BIN)/pip install -q --force-reinstall --no-deps dist/transcoder_native-*.whl
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,spark]'
	touch $@

# Wheels to install without a toolchain (`pip install -c constraints.txt dist/*.whl`, dependencies from PyPI):
# native/'s, as `venv` built it, and transcoder's (pure Python, seconds). tests/integration/test_wheel.py installs
# them into a clean venv with no cargo on the PATH.
dist: $(NATIVE_WHEEL)
	rm -rf build dist/transcoder-*.whl  # setuptools would pack build/lib's stale modules too
	$(BIN)/pip wheel -q --no-deps -w dist .

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
# (fresh-clone CI of 36ffbdc). Beside it, from its start, tests/cluster and the long fault tests marked `beside`,
# which it leaves out: one process, one local 3-node KRaft cluster for the session (and a broker of its own for the
# `beside` ones); its output is printed after the first session's. Run one after the other they took 20:47 + 6:50
# of a 29:25 fresh-clone run (2026-11-29), the machine busy 64% of the time: the runs waited on brokers and timers
# more than on the 2 cores. Past 25 minutes (--session-timeout, checked between tests) the side session stops and
# fails, saying so, rather than stretch the run. The target fails when either failed.
test: venv kafka-jars lint
	@cluster_log=$$(mktemp); \
	$(BIN)/python -m pytest tests/cluster tests/integration -m "cluster or beside" --session-timeout 1500 \
		-p no:cacheprovider > $$cluster_log 2>&1 & \
	cluster_pid=$$!; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --max-worker-restart 0 --ignore=tests/cluster \
		-m "not beside"; \
	main=$$?; wait $$cluster_pid; cluster=$$?; \
	echo "== tests/cluster and the tests marked beside (their session ran beside the one above)"; cat $$cluster_log; \
	rm -f $$cluster_log; \
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
	rm -rf $(VENV) .pytest_cache .mypy_cache build *.egg-info native/target dist
