"""transcoder.engines: one registry names the engines of run/validate and evaluate, builds each from its own module
only when chosen, and what it builds is an Engine (the type checker holds the builders to the contract)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from transcoder import config
from transcoder.engines import ENGINES, MEASURERS

RAW = {"cluster": {"bootstrap_servers": "k:9092"}, "routes": [{"source": "a", "destinations": [{"codec": "zstd"}]}],
       "metrics": {"port": 0}}


def test_the_cli_offers_the_registrys_engines_and_loads_none_of_them_for_help() -> None:
    code = ("import sys; from transcoder.cli import main; "
            "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'transcoder.spark', "
            "'transcoder.service'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert list(ENGINES) == ["service", "spark"] and list(MEASURERS) == ["service", "spark"]


@pytest.mark.parametrize("name", list(ENGINES))
def test_each_engine_is_built_from_the_config_with_the_contracts_surface(name: str) -> None:
    engine = ENGINES[name].build(config.parse(RAW, environ={}), None)
    assert engine.config.routes[0].source == "a"
    assert list(engine.lanes) == [] and engine.abandoned is False
    engine.stop()  # before run: only recorded
    assert engine.ready() == (False, "starting: pre-flight checks and topic provisioning")
    assert engine.serve() is None  # metrics.port 0: no endpoints


def test_only_spark_takes_a_master_and_it_lands_in_the_config() -> None:
    assert [n for n, e in ENGINES.items() if e.takes_master] == ["spark"]
    engine = ENGINES["spark"].build(config.parse(RAW, environ={}), "local[2]")
    assert engine.config.spark.master == "local[2]"
