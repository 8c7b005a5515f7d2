"""Ground truth for `transcoder evaluate` (issue 12): the sizes it computes for a sample are within 1% of
what the broker stores when the service copies the same records with the same codec, level and batch size.

The service's destinations linger 10 s, so librdkafka closes batches by size, not by time (with the default
500 ms, a 1 MiB batch sent early moved the stored size by up to 1.1% at 8 batches). Known gap of the model:
at 64 KiB librdkafka fits ~244 of these records in a batch where evaluate's cut (the batch producer's
per-record estimate) fits ~236: +0.3-0.6% in evaluate's sizes."""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli
from tests.support.configs import make_config
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import measure_partition
from transcoder.kafka.protocol import BrokerInfo
from transcoder.service.runner import Service

CASES = [(codec, level, size) for codec, level in (("zstd", None), ("lz4", None), ("snappy", None), ("gzip", None),
                                                  ("zstd", 19)) for size in (65536, 1048576)]


def test_evaluated_sizes_are_within_one_percent_of_what_the_broker_stores(kafka, topic_factory, read_topic):
    source = topic_factory(partitions=1)
    proc = run_cli("seed", "--kind", "nginx", "--count", "30000", "--topic", source, "-b", kafka.bootstrap)
    assert proc.returncode == 0, proc.stderr
    sample = [(m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]) for m in read_topic(source)]
    dests = [{"codec": c, **({"level": lv} if lv else {}), "topic": f"{source}.{c}{lv or ''}.{size}",
              "batch": {"max_bytes": size, "linger_ms": 10_000}} for c, lv, size in CASES]
    Service(make_config(kafka, [{"source": source, "destinations": dests}], metrics={"port": 0, "disk_interval_s": 0})
            ).run(until_caught_up=True)
    info = BrokerInfo({"bootstrap.servers": kafka.bootstrap})
    try:
        stored = info.topic_sizes([d["topic"] for d in dests])
    finally:
        info.close()
    for (codec, level, size), d in zip(CASES, dests, strict=True):
        [evaluated] = measure_partition(sample, [Cell(Setting(codec, level), size)], repeats=1)
        assert evaluated.records == 30_000
        assert evaluated.compressed_bytes == pytest.approx(stored[d["topic"]], rel=0.01), (codec, level, size)
        if level == 19:  # batches transcoder builds itself: evaluate frames them the same way, byte for byte
            assert evaluated.compressed_bytes == stored[d["topic"]]
