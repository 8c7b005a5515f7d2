"""One local SparkSession for the whole test session (Spark's start-up is the expensive part)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from transcoder.config import SparkConfig
from transcoder.spark import session


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    s = session.build(SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": 2}),
                      app_name="transcoder-tests")
    yield s
    s.stop()
