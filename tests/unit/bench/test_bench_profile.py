"""bench.profile (pure part): py-spy's collapsed stacks by thread state and by function; CPU by part."""

from __future__ import annotations

from bench.profile import collapsed, parts_table, samples_table

LANE = "thread (7001): lane-t.zstd;Thread.run (threading.py:982);Lane.run (transcoder/lane.py:310)"
RAW = f"""\
{LANE};Lane._copy (transcoder/lane.py:370) 30
{LANE};Lane._copy (transcoder/lane.py:371) 20
{LANE};Producer_produce (cimpl.cpython-311.so) 40
{LANE};Consumer_consume (cimpl.so);rd_kafka_consume_batch_queue (librdkafka.so.1);cnd_timedwait_abs (librdkafka.so.1) 25
{LANE};Lane._on_delivery (transcoder/lane.py:200);take_gil (libpython3.11.so.1.0);pthread_cond_timedwait (libc.so.6) 5
thread (7002): broker-figures;Event.wait (threading.py:629);PyThread_acquire_lock_timed (libpython3.11.so.1.0) 80
thread (7003): MainThread;Service.run (transcoder/service.py:300);json_loads (x.so) 10
not a sample line
"""


def test_collapsed_stacks_split_threads_by_state_and_count_the_lane_threads_on_cpu_self_time():
    s = collapsed(RAW.splitlines(), thread="lane-")
    assert s.total == 210
    assert s.by_thread["thread (7001): lane-t.zstd"] == {"on CPU": 90, "blocked": 25, "waiting for the GIL": 5}
    assert s.by_thread["thread (7002): broker-figures"] == {"blocked": 80}
    # two lines of one function count together; only the lane thread's on-CPU samples are counted
    assert s.self_by_function == {"Lane._copy (lane.py)": 50, "Producer_produce (cimpl.cpython-311.so)": 40}


def test_tables_show_shares():
    table = samples_table(collapsed(RAW.splitlines(), thread="lane-"), top=2).splitlines()
    assert table[2:4] == ["| `Lane._copy (lane.py)` | 55.6% |", "| `Producer_produce (cimpl.cpython-311.so)` | 44.4% |"]
    assert "| `thread (7001): lane-t.zstd` | 75% | 4% | 21% |" in table
    parts = parts_table({"consume": 1.0, "loop": 3.0}, records=500_000).splitlines()
    assert parts[2:] == ["| loop | 3.00 | 6.00 | 75% |", "| consume | 1.00 | 2.00 | 25% |",
                         "| all | 4.00 | 8.00 | 100% |"]
