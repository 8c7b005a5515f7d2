"""Ground truth for `transcoder evaluate` (issue 12): the sizes it computes for a sample are what the broker
stores when the service copies the same records with the same codec, level and batch size: byte for byte, since
evaluate cuts batches by the batched lanes' rule (native/'s Rebatcher) and compresses with the same code.

The service's destinations linger 10 s, so batches close by size, not by time (with the default 500 ms, a 1 MiB
batch sent early moved the stored size by up to 1.1% at 8 batches)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from tests.support.cli import run_cli
from tests.support.configs import make_config
from transcoder.codecs import compress
from transcoder.evaluate.batches import BATCH_OVERHEAD, cut_java, records_section
from transcoder.evaluate.grid import Cell, Setting
from transcoder.evaluate.measure import measure_partition
from transcoder.kafka.protocol import RawClient
from transcoder.service.runner import Service

CASES = [(codec, level, size) for codec, level in (("zstd", None), ("lz4", None), ("snappy", None), ("gzip", None),
                                                  ("zstd", 19)) for size in (65536, 1048576)]


def test_evaluated_sizes_are_what_the_broker_stores(kafka, topic_factory, read_topic):
    source = topic_factory(partitions=1)
    proc = run_cli("seed", "--kind", "nginx", "--count", "15000", "--topic", source, "-b", kafka.bootstrap)
    assert proc.returncode == 0, proc.stderr
    sample = [(m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]) for m in read_topic(source)]
    dests = [{"codec": c, **({"level": lv} if lv else {}), "topic": f"{source}.{c}{lv or ''}.{size}",
              "batch": {"max_bytes": size, "linger_ms": 10_000}} for c, lv, size in CASES]
    Service(make_config(kafka, [{"source": source, "destinations": dests}], metrics={"port": 0, "disk_interval_s": 0})
            ).run(until_caught_up=True)
    info = RawClient({"bootstrap.servers": kafka.bootstrap})
    try:
        stored = info.topic_sizes([d["topic"] for d in dests])
    finally:
        info.close()
    for (codec, level, size), d in zip(CASES, dests, strict=True):
        [evaluated] = measure_partition(sample, [Cell(Setting(codec, level), size)], repeats=1)
        assert evaluated.records == 15_000
        assert evaluated.compressed_bytes == stored[d["topic"]], (codec, level, size)


JAVA_CASES = [("zstd", 65536), ("lz4", 65536), ("gzip", 65536), ("zstd", 16384)]


def test_the_java_rule_predicts_what_mirrormaker_2_stores(kafka, topic_factory, read_topic, admin, tmp_path):
    """MirrorMaker 2 (Kafka's Java producer: batch.size counts estimated compressed bytes) copies the sample at
    each setting. At 64 KiB, evaluate's Java-rule cells are within 5% of what the broker then holds; where they
    differ from librdkafka's rule at the same batch.size by more than 3% (lz4), the truth lies between the two.

    At 16 KiB the truth depends on timing, so it is bracketed instead. Java's producer updates its
    compression-ratio estimate when its sender drains a batch, and a new batch takes the estimate of the moment
    it is opened. While the sender waits (for its producer id at start-up, or for in-flight requests), the task
    keeps filling batches with a stale estimate. Measured on this copy, zstd at 16 KiB: 166 batches in one run,
    220 in the run just before it (the model: 165 with no lag, 181 with 20 batches of lag); the stored bytes
    have been 960,139, 974,285 and 1,007,672 B against evaluate's 937,071 B. At 64 KiB, 70 batches in every
    run (the model: 70 with a lag of 0 or 1). So at 16 KiB the broker holds at least what evaluate reports
    (the sender keeps up), and at most what the same rule gives when the estimate never moves from 1.0.
    The Java client's zstd-jni, lz4-java and java.util.zip also differ from the Python codecs by a little
    (within 2% at 64 KiB)."""
    from bench import copiers
    from transcoder.dev.broker_process import LEAN_JVM
    from transcoder.dev.kafka_jars import DEFAULT_VERSION

    source = topic_factory(partitions=1)
    proc = run_cli("seed", "--kind", "nginx", "--count", "20000", "--topic", source, "-b", kafka.bootstrap)
    assert proc.returncode == 0, proc.stderr
    sample = [(m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]) for m in read_topic(source)]
    libs = copiers.fetch_mm2(DEFAULT_VERSION)
    stored = {}
    for i, (codec, size) in enumerate(JAVA_CASES):
        alias = f"j{i}{codec}"
        mm2 = copiers.start_mm2(libs, kafka.bootstrap, source, alias, codec,
                                copiers.Batching(max_bytes=size, linger_ms=10_000), tmp_path, alias, jvm=LEAN_JVM)
        try:
            dest = mm2.destination
            deadline = time.monotonic() + 120
            while _end(admin, dest) < 20_000:
                assert mm2.failed() is None and time.monotonic() < deadline, mm2.failed()
                time.sleep(0.5)
        finally:
            mm2.stop()
        info = RawClient({"bootstrap.servers": kafka.bootstrap})
        try:
            stored[(codec, size)] = info.topic_sizes([dest])[dest]
        finally:
            info.close()
        admin.delete_topics([dest, *copiers.mm2_state_topics(alias)])
    cells = [Cell(Setting(c, None), s, p) for c, s in JAVA_CASES for p in ("java", "librdkafka")]
    got = {(p.codec, p.batch_bytes, p.producer): p.compressed_bytes
           for p in measure_partition(sample, cells, repeats=1)}
    compared = []
    for codec, size in JAVA_CASES:
        java, rdkafka = got[(codec, size, "java")], got[(codec, size, "librdkafka")]
        truth = stored[(codec, size)]
        print(f"{codec} at {size} B: java rule {java}, librdkafka rule {rdkafka}, stored by MirrorMaker 2 {truth}")
        if size >= 65536:
            assert java == pytest.approx(truth, rel=0.05), (codec, size, java, rdkafka, truth)
            # Where the two rules differ by more than the Java and Python codecs can (lz4: 4% on this sample; gzip
            # 0.5%, zstd 2.2%), the truth lies between them, not always nearer the Java rule: MirrorMaker 2's lz4
            # batches at 64 KiB stored from 1,151,191 to 1,193,185 B across runs, against the Java rule's 1,198,4xx-
            # 1,198,5xx and librdkafka's 1,147,2xx-1,147,3xx (lz4-java's block stream against Python's lz4 frame,
            # and the sender's timing, move it by a few percent).
            if abs(java - rdkafka) > 0.03 * truth:
                assert min(java, rdkafka) * 0.98 <= truth <= max(java, rdkafka) * 1.02, (codec, size, java, rdkafka,
                                                                                         truth)
                compared.append(codec)
        else:
            stale = sum(BATCH_OVERHEAD + len(compress(codec, records_section(b)))
                        for b in cut_java(sample, batch_size=size, codec=codec, lag=len(sample)))
            assert java * 0.98 <= truth <= stale * 1.02, (codec, size, java, stale, truth)
            assert stale > java * 1.05  # the bracket says something: the estimate's lag moves the size
    assert "lz4" in compared  # the rules differ most there (4% on this sample): the bracket was checked


def _end(admin, topic: str) -> int:
    if topic not in admin.list_topics(timeout=10).topics:
        return 0
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.latest()})[tp].result().offset
