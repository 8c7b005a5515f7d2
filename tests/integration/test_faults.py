"""Faults on the real broker, each proven record by record (tests/support/faults.py): the broker SIGKILLed and
restarted, the broker unreachable for 60 s behind a TCP proxy, transcoder SIGKILLed three times, a rebalance
storm, a slow destination. Every fault runs with both guarantees: nothing lost; duplicates 0 under exactly-once,
and under at-least-once at most `duplicate_bound` per fault (in-flight records + commit_interval_ms of traffic).

Both guarantees copy to two lanes, zstd levels 3 and 19, on their default path (record sets fetched raw,
re-batched in compiled code, sent by transcoder's BatchProducer; exactly-once: its transactional one). Exactly-once
also runs record by record (`hot_path: records`, librdkafka's transactional producer), to zstd level 3 only (it
refuses levels 13-22), in the faults that kill, restart or cut off (GUARANTEES_DEFAULT_PATH).

What the service does during an outage (docs/guarantees.md): it keeps retrying, never exits on its
own; /readyz answers 503 while a lane cannot copy and 200 again once it can; a SIGTERM during the outage stops
it within shutdown_timeout_s + 5 s, logging how many records were not committed (copied again on restart).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.cluster import Cluster
from tests.support.faults import (
    Comparison,
    Throughput,
    compare_topics,
    dest_count,
    duplicate_bound,
    http_get,
    kill,
    log_events,
    metric,
    produce_records,
    rss_bytes,
    start,
    wait_for,
    write_config,
)
from transcoder.dev.ports import free_port

#: each guarantee on its default path, record sets fetched raw, re-batched in compiled code and sent by transcoder's
#: BatchProducer (exactly-once: its transactional one); and exactly-once record by record (`hot_path: records`:
#: librdkafka's transactional producer)
GUARANTEES = ["at-least-once", "exactly-once", "exactly-once-records"]
#: a rebalance storm and a slow destination: the default path under both guarantees. The records path runs the
#: faults that kill, restart or cut off what librdkafka's transactional producer talks to; its hand-overs between
#: instances are tests/integration/test_exactly_once.py's (a paused instance fenced, offsets left pending). Its
#: storm and slow-destination runs took 2.2 of the 23 worker-minutes this file took in CI.
GUARANTEES_DEFAULT_PATH = ["at-least-once", "exactly-once"]
SETTINGS: dict[str, dict[str, str]] = {"at-least-once": {"guarantee": "at-least-once"},
                                       "exactly-once": {"guarantee": "exactly-once"},
                                       "exactly-once-records": {"guarantee": "exactly-once", "hot_path": "records"}}
PARTITIONS = 3
RECORDS = 40_000
COMMIT_INTERVAL_MS = 100
MAX_IN_FLIGHT = 256 * 1024
#: bytes/s per destination producer (~1,000 records/s): the copy takes ~40 s, so each fault lands mid-copy, and
#: the producers, not the consumer, set the pace: records wait in flight (up to max_in_flight_bytes), as in a
#: copy that is behind.
QUOTA = 100_000
SHUTDOWN_TIMEOUT_S = 10.0
#: Records wait this long in a producer before their batch goes: whenever a fault lands, some are in flight (up to
#: max_in_flight_bytes), so a build that commits what is not acknowledged loses records here.
LINGER_MS = 1000


@dataclass
class Copy:
    """A source topic, its destinations under one guarantee, the config that copies it, and its child processes."""

    kafka: Cluster
    admin: Any
    tmp: Path
    guarantee: str
    source: str
    smallest: int  # the smallest source record (bytes): the unit of the in-flight bound
    path: str = ""
    port: int = 0
    dests: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    procs: list[Any] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def configure(self, **extra: Any) -> None:
        destinations = [{"codec": "zstd", "level": 3, "batch": {"linger_ms": LINGER_MS}}]
        if self.guarantee != "exactly-once-records":  # transcoder's BatchProducer (librdkafka's refuses zstd 13-22)
            destinations.append({"codec": "zstd", "level": 19, "batch": {"linger_ms": LINGER_MS}})
        self.dests = [f"{self.source}.zstd-{d['level']}" for d in destinations]
        self.port = free_port()
        settings: dict[str, Any] = {**SETTINGS[self.guarantee], "commit_interval_ms": COMMIT_INTERVAL_MS,
                                    "max_in_flight_bytes": MAX_IN_FLIGHT, "shutdown_timeout_s": SHUTDOWN_TIMEOUT_S,
                                    "metrics": {"port": self.port, "stats_interval_ms": 1000}}
        settings.update(extra)
        self.settings = settings
        self.path = write_config(self.tmp, self.kafka, [{"source": self.source, "destinations": destinations}],
                                 **settings)

    def start(self, *args: str, config: str | None = None) -> Any:
        log = self.tmp / f"run-{len(self.procs)}.log"
        p = start(config or self.path, *args, log=log)
        self.procs.append(p)
        self.logs.append(log)
        return p

    def throttle(self, rate: int | None) -> None:
        for d in self.dests:
            self.kafka.throttle_producer(f"transcoder-{d}", rate)

    def committed(self) -> dict[str, int]:
        """Per destination lane: the source offsets its group has committed, summed over partitions."""
        from confluent_kafka import Consumer, TopicPartition

        group = yaml.safe_load(Path(self.path).read_text())["group_id"]
        out = {}
        for d in self.dests:
            # read_uncommitted: the offsets committed so far, not waiting (as read_committed's require_stable does,
            # KIP-447) for those a SIGKILLed instance left pending in an open transaction, until the broker aborts it
            c = Consumer({"bootstrap.servers": self.kafka.bootstrap, "group.id": f"{group}.{d}",
                          "isolation.level": "read_uncommitted"})
            try:
                got = c.committed([TopicPartition(self.source, p) for p in range(PARTITIONS)], timeout=30)
            finally:
                c.close()
            out[d] = sum(max(0, tp.offset) for tp in got)
        return out

    def in_flight(self) -> dict[str, int]:
        """Per lane (from /status): records read and not yet acknowledged by its destination."""
        import json

        status, body = http_get(self.port, "/status")
        if status is None:
            return {}
        return {ln["name"]: ln["records"] - sum(d["records_out"] for d in ln["destinations"])
                for ln in json.loads(body)["lanes"]}

    def when_in_flight(self, timeout: float = 15.0) -> bool:
        """Wait until every lane has records in flight (a fault then interrupts a delivery); False if none came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.in_flight()
            if got and len(got) == len(self.dests) and all(n > 0 for n in got.values()):
                return True
            time.sleep(0.05)
        return False

    def counts(self) -> dict[str, int]:
        return {d: dest_count(self.admin, d) for d in self.dests}

    def wait_progress(self, at_least: int, timeout: float = 120.0, *, every: bool = True) -> None:
        """Until every destination (or, not `every`, one of them) holds `at_least` more offsets than now."""
        before = self.counts()
        which = all if every else any
        try:
            wait_for(lambda: which(n >= before[d] + at_least for d, n in self.counts().items()), timeout,
                     f"{at_least} more records in {'each' if every else 'one'} of {self.dests}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: before {before}, now {self.counts()}\n{self.log_text()}") from None

    def finish(self) -> None:
        """Copy the rest (a fresh `transcoder run --until-caught-up`), as an operator's restart would."""
        log = self.tmp / "finish.log"  # kept: a check that fails after it names it
        self.logs.append(log)
        try:
            proc = run_cli("run", "--config", self.path, "--until-caught-up", timeout=300,
                           env={"TRANSCODER_LOG_LEVEL": "info"})
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr or b""
            log.write_text(err.decode(errors="replace") if isinstance(err, bytes) else err)
            raise AssertionError(f"the final run did not catch up within 300 s: its log is {log}, "
                                 f"counts now {self.counts()}\n{log.read_text()[-3000:]}") from None
        log.write_text(proc.stderr)
        assert proc.returncode == 0, proc.stderr[-3000:]

    def compare(self) -> list[Comparison]:
        return [compare_topics(self.kafka.bootstrap, self.source, d) for d in self.dests]

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                kill(p)
                p.wait(30)

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace")[-4000:] for p in self.logs if p.exists())

    def hand_overs_left_uncommitted(self, lane: str) -> int:
        """How many times the runs' lane `lane` let partitions go with records read past their commit, from their
        logs: it lost them to the group (partitions_lost: its session expired), or a revoke's drain ran out or its
        commit failed (partitions_revoked_with_records_uncommitted)."""
        n = 0
        for path in self.logs:
            for line in path.read_text(errors="replace").splitlines() if path.exists() else ():
                if '"partitions_lost"' in line or '"partitions_revoked_with_records_uncommitted"' in line:
                    with contextlib.suppress(ValueError):
                        n += json.loads(line).get("lane") == lane
        return n


@pytest.fixture
def copy(kafka: Cluster, admin: Any, topic_factory: Any, tmp_path: Path, request: pytest.FixtureRequest):
    guarantee = request.node.callspec.params["guarantee"]
    source = topic_factory(partitions=PARTITIONS)
    smallest = produce_records(kafka.bootstrap, source, RECORDS, partitions=PARTITIONS)
    c = Copy(kafka, admin, tmp_path, guarantee, source, smallest)
    c.configure()
    yield c
    c.stop_all()
    with contextlib.suppress(Exception):  # the broker may be the fault: the test has failed then
        c.throttle(None)


def check(copy: Copy, results: list[Comparison], rate: Throughput, faults: int, records: int = RECORDS) -> None:
    """Nothing lost, nothing foreign, source order kept; duplicates 0 (exactly-once) or within the bound: per fault,
    and per hand-over the lane says it left uncommitted beyond one per fault: a membership lost (a starved machine's
    heartbeats late past the tests' 6-s session.timeout.ms; 3 after one broker restart in a fresh-clone CI run,
    7,065 duplicates against one fault's 4,095) or a revoke whose drain ran out (a rebalance storm: 4,418 against
    4,097): each a fault of its own, the partitions read again from their last commit by the next owner."""
    figures, bounds = [], []
    for r in results:
        lost = copy.hand_overs_left_uncommitted(r.destination_topic)  # the lanes are named after their destination
        counted = faults + max(0, lost - faults)
        bound = 0 if copy.guarantee.startswith("exactly-once") else duplicate_bound(
            max_in_flight_bytes=MAX_IN_FLIGHT, smallest_record=copy.smallest,
            records_per_s=rate.peak(r.destination_topic), commit_interval_ms=COMMIT_INTERVAL_MS, faults=counted)
        bounds.append(bound)
        figures.append(f"{r.summary()}; bound {bound} (peak {rate.peak(r.destination_topic):.0f} records/s, "
                       f"{faults} faults, hand-overs left uncommitted {lost})")
    print("\n".join(figures))
    logs = "the runs' logs: " + ", ".join(str(p) for p in copy.logs)
    for r, bound, figure in zip(results, bounds, figures, strict=True):
        line = f"{figure}\n{logs}"
        assert r.source == records, line
        assert r.lost == 0, line
        assert r.foreign == 0, line
        assert r.in_order, line
        assert r.duplicates <= bound, line


# ------------------------------------------------------------------ the faults
@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_broker_sigkilled_mid_copy_and_restarted(copy: Copy, kafka: Cluster, guarantee: str):
    """The broker SIGKILLed mid-copy, down 12 s, restarted on the same data: the running copy carries on."""
    if kafka.local is None:
        pytest.skip("killing the broker needs the session's own broker")
    copy.throttle(QUOTA)
    with Throughput(copy.admin, copy.dests) as rate:
        p = copy.start("--until-caught-up")
        copy.wait_progress(RECORDS // 6)
        copy.when_in_flight()
        at_kill = copy.counts()
        kafka.local.kill()
        try:
            time.sleep(12)
        finally:
            kafka.local.restart()  # the session's broker: the rest of the suite needs it
        copy.throttle(None)
        assert all(n < RECORDS for n in at_kill.values()), f"the copy was done before the kill: {at_kill}"
        assert p.wait(240) == 0, copy.log_text()
    check(copy, copy.compare(), rate, faults=1)


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_transcoder_sigkilled_three_times_during_one_copy(copy: Copy, guarantee: str):
    copy.throttle(QUOTA)
    with Throughput(copy.admin, copy.dests) as rate:
        for _ in range(3):
            p = copy.start()
            # one lane may copy much faster than the other (zstd 19 is CPU-bound on a loaded machine): waiting for
            # progress in both, the fast one could be done before the third kill
            copy.wait_progress(RECORDS // 10, every=False)
            copy.when_in_flight()
            kill(p, signal.SIGKILL)
            p.wait(30)
            print("after a SIGKILL: written", copy.counts(), "committed", copy.committed())
        assert all(n < RECORDS for n in copy.counts().values()), "the copy was done before the third kill"
        copy.throttle(None)
    copy.finish()
    check(copy, copy.compare(), rate, faults=3)


@pytest.mark.parametrize("guarantee", GUARANTEES_DEFAULT_PATH)
def test_rebalance_storm(copy: Copy, guarantee: str):
    """One instance copies while others join and leave (SIGTERM) every few seconds."""
    copy.throttle(QUOTA // 2)  # the storm lasts ~40 s: the copy must outlast most of it
    with Throughput(copy.admin, copy.dests) as rate:
        first = copy.start()
        copy.wait_progress(2000)
        raw = yaml.safe_load(Path(copy.path).read_text())  # the same group; no endpoints (the port is taken)
        joining_config = write_config(copy.tmp, copy.kafka, raw["routes"], name="joining.yaml", **{
            **copy.settings, "group_id": raw["group_id"], "metrics": {"port": 0}})
        mid_copy = 0
        for _ in range(4):
            mid_copy += all(n < RECORDS for n in copy.counts().values())
            joining = copy.start(config=joining_config)
            time.sleep(4)
            joining.send_signal(signal.SIGTERM)
            code = joining.wait(60)
            assert code == 0, f"a joining instance exited {code}: {copy.logs[-1]}\n" \
                              f"{copy.logs[-1].read_text(errors='replace')[-6000:]}"
            time.sleep(1)
        assert mid_copy >= 2, f"only {mid_copy} of 4 instances joined mid-copy"
        copy.throttle(None)
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0, copy.log_text()
    copy.finish()
    assert "Traceback" not in copy.log_text()
    # Every hand-over drains and commits first (a revoke drains, a SIGTERM drains): duplicates only where a drain
    # outlasts shutdown_timeout_s, which the lane says (each a fault in check). The bound allows one fault's worth
    # over the whole storm beyond those.
    check(copy, copy.compare(), rate, faults=1)


@pytest.mark.beside  # 6 worker-minutes, most of them the outage's: beside the main session, with tests/cluster
@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_broker_unreachable_for_60_s(copy: Copy, kafka: Cluster, broker_proxy: Any, guarantee: str):
    """The broker cut off for 60 s (connections closed, new ones refused): the service keeps retrying, /readyz
    says 503, then 200 when it copies again. Then a stall (nothing forwarded) and a SIGTERM during it: the
    process exits within shutdown_timeout_s + 10 s, saying how many records were not committed."""
    assert kafka.proxied_bootstrap is not None
    copy.path = write_config(copy.tmp, kafka, [{"source": copy.source, "destinations": [
        {"codec": "zstd", "level": int(d.rsplit("-", 1)[1]), "batch": {"linger_ms": LINGER_MS}} for d in copy.dests]}],
        bootstrap=kafka.proxied_bootstrap, name="proxied.yaml", **SETTINGS[guarantee],
        commit_interval_ms=COMMIT_INTERVAL_MS, max_in_flight_bytes=MAX_IN_FLIGHT,
        shutdown_timeout_s=SHUTDOWN_TIMEOUT_S, metrics={"port": copy.port, "stats_interval_ms": 1000})
    copy.throttle(QUOTA)
    try:
        with Throughput(copy.admin, copy.dests) as rate:
            p = copy.start()
            copy.wait_progress(RECORDS // 10)
            wait_for(lambda: http_get(copy.port, "/readyz")[0] == 200, 30, "/readyz 200 before the outage")
            broker_proxy.cut()
            cut_at = time.monotonic()
            log_mark = copy.logs[-1].stat().st_size
            ready: list[tuple[float, int | None]] = []
            while time.monotonic() - cut_at < 60:
                ready.append((round(time.monotonic() - cut_at, 1), http_get(copy.port, "/readyz")[0]))
                time.sleep(1)
            outage_log = copy.logs[-1].read_text(errors="replace")[log_mark:]
            broker_proxy.restore()
            assert p.poll() is None, "the service exited during the outage: " + copy.log_text()
            restored_at = time.monotonic()
            wait_for(lambda: http_get(copy.port, "/readyz")[0] == 200, 90, "/readyz 200 after the outage")
            back_after = time.monotonic() - restored_at
            copy.wait_progress(2000, timeout=120)
            print(f"/readyz during the cut: {ready}; 200 again {back_after:.1f} s after it ended")
            lines = outage_log.count("\n")
            noisy = {e: outage_log.count(f'"event": "{e}"') for e in (
                "metadata_request_failed", "produce_request_failed", "broker_unreachable")}
            print(f"log lines during the 60 s cut: {lines}; {noisy}")
            # 503 within a few seconds (a lane sees Kafka unreachable at its next commit interval), until the end;
            # not only once the group has dropped the member (session.timeout.ms, 6 s here) and its partitions.
            assert all(s == 503 for t, s in ready if t >= 4), f"/readyz during the outage: {ready}"
            # Repeated failures are logged with back-off and a count, not per attempt (some lines per lane
            # and client are fine: the first failure, a summary each 30 s, the lane's cannot-copy line).
            assert lines <= 60, outage_log[-5000:]

            # The stall, and a SIGTERM in it (2 s in: before the group drops this member, session.timeout.ms 6 s,
            # so the lanes still own the records they cannot deliver).
            copy.wait_progress(1000, timeout=60)
            copy.throttle(20_000)  # records pile up in flight: the stop cannot deliver them
            time.sleep(3)
            broker_proxy.stall()
            time.sleep(2)
            stopped_at = time.monotonic()
            p.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):  # reported below
                p.wait(SHUTDOWN_TIMEOUT_S + 10)
            took = time.monotonic() - stopped_at
            print(f"SIGTERM during the stall: exited after {took:.1f} s with {p.poll()}")
            assert p.poll() is not None, f"still running {took:.0f} s after SIGTERM during an outage"
            broker_proxy.restore()
            said = log_events(copy.logs[-1], "shutdown_timeout_exceeded") + log_events(
                copy.logs[-1], "lane_stopped_with_records_in_flight")
            print("uncommitted at exit:", [(e.get("lane"), e.get("records_not_committed", e.get("records")))
                                           for e in said])
            assert said, copy.log_text()
            assert all("copied again" in e.get("note", "") for e in said)
            copy.throttle(None)
            copy.finish()
    finally:
        broker_proxy.restore()
    check(copy, copy.compare(), rate, faults=2)


@pytest.mark.parametrize("guarantee", GUARANTEES_DEFAULT_PATH)
def test_slow_destination_bounds_memory_and_lag_grows(copy: Copy, kafka: Cluster, guarantee: str):
    """A producer quota slows every destination below the rate records arrive: the lanes stop reading at
    max_in_flight_bytes, so RSS stays under a stated bound, and the lag metric grows."""
    copy.throttle(10_000)  # bytes/s as stored: below the feed even at zstd-19's ratio on these records
    stop = threading.Event()
    more = {"records": 0}

    def feed() -> None:  # ~2,000 records/s into the source, far more than the quota lets out
        i = RECORDS
        while not stop.is_set():
            produce_records(kafka.bootstrap, copy.source, 1000, partitions=PARTITIONS, start=i)
            i += 1000
            more["records"] += 1000
            stop.wait(0.5)

    feeder = threading.Thread(target=feed, daemon=True)
    rss: list[int] = []
    lag: dict[str, list[float]] = {d: [] for d in copy.dests}
    with Throughput(copy.admin, copy.dests) as rate:
        p = copy.start()
        feeder.start()
        wait_for(lambda: http_get(copy.port, "/readyz")[0] == 200, 60, "the lanes to start")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 25:
            if (r := rss_bytes(p.pid)) is not None:
                rss.append(r)
            for d in copy.dests:
                total = sum(v for part in range(PARTITIONS)
                            if (v := metric(copy.port, "transcoder_consumer_lag_records", lane=d,
                                            partition=str(part))) is not None)
                lag[d].append(total)
            time.sleep(0.5)
        stop.set()
        feeder.join(30)
        copy.throttle(None)
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, copy.log_text()
        copy.finish()
    lanes = len(copy.dests)
    # The stated bound: per lane, max_in_flight_bytes read ahead and its producer's copy of them, the consumer's
    # prefetch (queued.max.messages.kbytes, 32 MiB); plus the interpreter and its libraries (200 MiB).
    bound = lanes * (2 * MAX_IN_FLIGHT + 32 * 1024 * 1024) + 200 * 1024 * 1024
    print(f"RSS samples (MiB): {[round(r / 2**20) for r in rss[::4]]}; peak {max(rss) / 2**20:.0f} MiB, "
          f"bound {bound / 2**20:.0f} MiB")
    print("lag (records) per lane:", {d: [int(v) for v in s[::4]] for d, s in lag.items()})
    assert max(rss) <= bound
    for d, s in lag.items():
        seen = [v for v in s if v > 0]
        assert len(seen) >= 5 and seen[-1] > seen[0], f"{d}: lag did not grow: {s}"
    check(copy, copy.compare(), rate, faults=1, records=RECORDS + more["records"])  # the source grew meanwhile


@pytest.mark.parametrize("guarantee", ["at-least-once"])
def test_lag_counts_records_that_arrive_while_a_lane_is_paused(copy: Copy, kafka: Cluster, broker_proxy: Any,
                                                                guarantee: str):
    """A lane paused by backpressure does not fetch, and librdkafka learns a partition's end only from fetches:
    its lag figure stood still (then shrank as commits went on) exactly while the destination fell behind. Records
    written to the source while a lane cannot deliver must show in its lag within a few statistics intervals.

    The destinations are reached through the proxy (`destination_cluster`), which stalls: nothing is delivered,
    so the lanes stay paused for as long as the test needs, while the source stays reachable. They first copy
    the source, so every partition has a commit (lag is reported from a partition's first commit on, as Kafka's
    tools report a group's lag). At-least-once only: an exactly-once lane's commit waits for everything in flight,
    and its loop with it."""
    assert kafka.proxied_bootstrap is not None
    raw = yaml.safe_load(Path(copy.path).read_text())
    raw["destination_cluster"] = {**raw["cluster"], "bootstrap_servers": kafka.proxied_bootstrap}
    split = copy.tmp / "split.yaml"
    split.write_text(yaml.safe_dump(raw))
    burst = 30_000

    def lags() -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for d in copy.dests:
            got = [metric(copy.port, "transcoder_consumer_lag_records", lane=d, partition=str(part))
                   for part in range(PARTITIONS)]
            out[d] = None if None in got else sum(v for v in got if v is not None)
        return out

    p = copy.start(config=str(split))
    seen: list[tuple[dict[str, float | None], dict[str, int]]] = []
    try:
        wait_for(lambda: all(v == 0 for v in lags().values()), 120, "every lane to copy the source (lag 0)")
        broker_proxy.stall()
        produce_records(kafka.bootstrap, copy.source, 5_000, partitions=PARTITIONS, start=RECORDS)
        wait_for(lambda: all((metric(copy.port, "transcoder_backpressure_pauses_total", lane=d) or 0) >= 1
                             for d in copy.dests), 60, "every lane to pause")
        produce_records(kafka.bootstrap, copy.source, burst, partitions=PARTITIONS, start=RECORDS + 5_000)
        total = RECORDS + 5_000 + burst

        # lag is the source's end - the lane's last commit: with what the group has committed (never less), it
        # reaches the source's end once the lane knows it. Learning ends from fetches, it stays at the pause's.
        def knows_the_end() -> bool:
            seen.append((lags(), copy.committed()))
            return all((seen[-1][0][d] or 0) + seen[-1][1][d] >= total for d in copy.dests)

        wait_for(knows_the_end, 30, f"every lane's lag to count the source's {total} records")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: (lag, committed) first {seen[:1]}, last {seen[-1:]}\n{copy.log_text()}") from None
    finally:
        broker_proxy.restore()
        p.send_signal(signal.SIGTERM)
        p.wait(60)


# ------------------------------------------------------------------ the BatchProducer through an outage
def test_batch_producer_delivers_and_logs_quietly_through_an_outage(kafka: Cluster, broker_proxy: Any,
                                                                   topic_factory: Any, caplog: Any,
                                                                   fresh_structlog: None, monkeypatch: Any):
    """transcoder's own producer (zstd 13-22) with batches in flight when the broker is cut off for 20 s: every
    record is delivered once the broker is back (in order per partition, so the ledger's commits keep pace), and
    the failures are logged a few times with a count, not once per attempt."""
    import logging

    import structlog

    from transcoder.kafka.producer import BatchProducer

    assert kafka.proxied_bootstrap is not None
    topic = topic_factory(partitions=PARTITIONS)
    delivered: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err.str())
        else:
            delivered[msg.partition()].append(int(msg.key()))

    n = 30_000
    caplog.set_level(logging.INFO, logger="kafka")
    with structlog.testing.capture_logs() as logs:
        p = BatchProducer({"bootstrap.servers": kafka.proxied_bootstrap}, codec="zstd", level=19,
                          client_id=f"faults-bp-{time.monotonic_ns()}", linger_ms=5, max_bytes=64 * 1024,
                          max_records=500, on_delivery=on_delivery)
        p.start()
        for i in range(n):
            p.produce(topic, value=b"x" * 100 + str(i).encode(), key=str(i).encode(), partition=i % PARTITIONS)
        wait_for(lambda: p.poll(0.1) >= 0 and sum(map(len, delivered.values())) >= 2000, 60, "first deliveries")
        broker_proxy.cut()
        try:
            cut_at = time.monotonic()
            while time.monotonic() - cut_at < 20:
                p.poll(0.2)
            at_restore = sum(map(len, delivered.values()))
        finally:
            broker_proxy.restore()
        wait_for(lambda: p.poll(0.1) >= 0 and sum(map(len, delivered.values())) + len(errors) >= n, 120,
                 "every delivery report after the outage")
        p.close(10)
    events = [e["event"] for e in logs]
    kafka_lines = [r for r in caplog.records if r.name.startswith("kafka") and r.levelno >= logging.WARNING]
    print(f"delivered {sum(map(len, delivered.values()))} of {n} ({at_restore} before the broker came back), "
          f"errors {len(errors)}; our log lines {len(events)}: {dict(Counter(events))}; kafka-python's lines at "
          f"WARNING or above: {len(kafka_lines)}")
    assert not errors, errors[:3]
    for part, keys in delivered.items():
        assert keys == sorted(keys) and len(keys) == len(set(keys)) == len(range(part, n, PARTITIONS)), part
    assert len(events) <= 10, dict(Counter(events))
