"""Where one transcoder lane's CPU goes: by part (consume, produce, loop) and, with py-spy, by function.

    python -m bench.profile [--codec zstd] [--level N] [--count 1000000] [--kind nginx] [--hot-path batches|records]
                            [-b host:port] [--no-py-spy]

It seeds the dataset from another process (one partition, uncompressed), copies it with one lane in
this process (`Service.run(until_caught_up=True)`, as `transcoder run --until-caught-up`) and prints:
- CPU seconds per 1M records by part, from the service's own thread ledger (/proc/self/task):
  consume = librdkafka's consumer threads (fetch, decompress), produce = the producer's threads
  (compress, send), loop = the lane's Python thread, other threads = the main thread, the
  broker-figures poller and kafka-python's I/O thread;
- with py-spy (`pip install py-spy`; it attaches with ptrace: root or CAP_SYS_PTRACE), each Python
  thread's samples split into on CPU, waiting for the GIL and blocked, and the lane thread's on-CPU
  samples by innermost function, native frames included (confluent-kafka's C calls, CPython's
  internals). py-spy pauses the process for each sample: the run is slower with it; take the
  part figures from a `--no-py-spy` run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.copiers import process_cpu
from bench.measure import delete_topics
from transcoder import config, logs
from transcoder.dev.local_kafka import LocalKafka
from transcoder.kafka.clients import connect_admin
from transcoder.service.runner import Service

# ---------------------------------------------------------------- pure: py-spy's collapsed stacks
#: Frames of a thread that is off the CPU: blocked in a wait, or waiting for the GIL. py-spy's --native
#: mode samples such threads too (and never sees librdkafka's own threads, which are not Python's).
GIL_WAIT = ("take_gil",)
BLOCKED = ("pthread_cond_timedwait", "pthread_cond_wait", "epoll_wait", "PyThread_acquire_lock_timed",
           "cnd_timedwait", "cnd_wait", "select_epoll_poll", "time_sleep", "__poll", "nanosleep", "sem_timedwait")


@dataclass(frozen=True)
class Samples:
    total: int
    by_thread: dict[str, Counter[str]]  # thread label -> state (on CPU / GIL wait / blocked) -> samples
    self_by_function: Counter[str]  # on-CPU samples of the chosen threads, by innermost frame's function


def _function(frame: str) -> str:
    """`name (file.py:12)` -> `name (file.py)`: lines of one function count together."""
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame
    path = where.rstrip(")").rsplit(":", 1)[0]
    return f"{name} ({os.path.basename(path)})"


def _state(frames: list[str]) -> str:
    names = [f.partition(" (")[0] for f in frames]
    if any(n.startswith(GIL_WAIT) for n in names):
        return "waiting for the GIL"
    if any(n.startswith(BLOCKED) for n in names):
        return "blocked"
    return "on CPU"


def collapsed(lines: Iterable[str], thread: str = "") -> Samples:
    """Aggregate py-spy's `--format raw --threads` output (`thread (N): name;frame;...;frame count` per
    line): every thread's samples by state, and the on-CPU self time by function of the threads whose
    label holds `thread`."""
    total = 0
    by_thread: dict[str, Counter[str]] = {}
    by_function: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        label, *frames = stack.split(";")
        total += n
        state = _state(frames)
        by_thread.setdefault(label, Counter())[state] += n
        if state == "on CPU" and thread in label:
            by_function[_function(frames[-1]) if frames else "(no frame)"] += n
    return Samples(total, by_thread, by_function)


STATES = ("on CPU", "waiting for the GIL", "blocked")


def samples_table(s: Samples, top: int = 20) -> str:
    on_cpu = sum(s.self_by_function.values())
    lines = ["| function (innermost frame) | share of the thread's on-CPU samples |", "|---|---|"]
    for fn, n in s.self_by_function.most_common(top):
        lines.append(f"| `{fn}` | {n / on_cpu:.1%} |")
    lines += ["", "| Python thread | " + " | ".join(STATES) + " |", "|---|" + "---|" * len(STATES)]
    for th, states in sorted(s.by_thread.items(), key=lambda kv: -kv[1]["on CPU"]):
        total = sum(states.values())
        lines.append(f"| `{th}` | " + " | ".join(f"{states[st] / total:.0%}" for st in STATES) + " |")
    return "\n".join(lines)


def parts_table(cpu: dict[str, float], records: int) -> str:
    lines = ["| part | CPU s | CPU s per 1M records | share |", "|---|---|---|---|"]
    total = sum(cpu.values())
    for part, s in sorted(cpu.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {part} | {s:.2f} | {s / records * 1e6:.2f} | {s / total:.0%} |")
    lines.append(f"| all | {total:.2f} | {total / records * 1e6:.2f} | 100% |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the run
def machine_cpu() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    steal = fields[7] if len(fields) > 7 else 0
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle - steal) / tick, steal / tick


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--codec", default="zstd")
    ap.add_argument("--level", type=int)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--kind", default="nginx")
    ap.add_argument("--hot-path", choices=("batches", "records"), default="batches", help="the config's hot_path")
    ap.add_argument("-b", "--bootstrap-servers")
    ap.add_argument("--py-spy", dest="py_spy", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    args = ap.parse_args()
    logs.configure("warning")
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if args.py_spy and spy is None:
        raise SystemExit("py-spy is not installed (pip install py-spy), or pass --no-py-spy")

    work = Path(tempfile.mkdtemp(prefix="transcoder-profile-"))
    local = None
    broker_pid = None
    bootstrap = args.bootstrap_servers
    if bootstrap is None:
        local = LocalKafka(work / "kafka")
        st = local.up()
        bootstrap, broker_pid = st.bootstrap, st.pid
    source = f"profile.{args.kind}.{int(time.time())}"
    dest = {"codec": args.codec, "topic": f"{source}.{args.codec}"}
    sampler = None
    raw = work / "py-spy.txt"
    try:
        # Seeded by another process: this one's CPU is then the service's alone.
        subprocess.run([sys.executable, "-m", "transcoder", "seed", "--kind", args.kind, "--count", str(args.count),
                        "--topic", source, "-b", bootstrap, "--partitions", "1", "--seed", "1"], check=True)
        if args.level is not None:
            dest["level"] = args.level
        conf = config.parse({"cluster": {"bootstrap_servers": bootstrap}, "group_id": f"profile-{source}",
                             "routes": [{"source": source, "destinations": [dest]}], "metrics": {"port": 0},
                             "hot_path": args.hot_path},
                            source="profile", environ={})
        service = Service(conf)
        if args.py_spy:
            assert spy is not None
            sampler = subprocess.Popen([spy, "record", "--pid", str(os.getpid()), "--native", "--threads",
                                        "--rate", str(args.rate), "--format", "raw", "--output", str(raw)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0, machine0 = time.perf_counter(), machine_cpu()
        broker0 = process_cpu(broker_pid) if broker_pid else None
        service.run(until_caught_up=True)
        wall = time.perf_counter() - t0
        busy, steal = (b - a for a, b in zip(machine0, machine_cpu(), strict=True))
        broker = process_cpu(broker_pid) - broker0 if broker_pid and broker0 is not None else None
        cpu = {part: s for (_, part), s in service.cpu_by_lane().items()}
        # The main thread (start-up, pre-flight), the broker-figures poller and kafka-python's I/O thread
        cpu["other threads"] = service.threads.cpu_by_owner().get("unattributed", 0.0)
        records = sum(lane.status.records for lane in service.lanes)
        source_bytes = sum(lane.status.source_bytes for lane in service.lanes)
    finally:
        if sampler is not None:  # py-spy writes its profile when interrupted
            sampler.send_signal(signal.SIGINT)
            _, err = sampler.communicate(timeout=120)
        if local is not None:
            local.down()
        else:  # someone else's cluster: leave nothing behind
            admin, _ = connect_admin({"bootstrap.servers": bootstrap})
            delete_topics(admin, [source, dest["topic"]])
    if sampler is not None and not raw.exists():
        raise SystemExit(f"py-spy wrote no profile: {err.decode(errors='replace').strip()[-400:]}")

    n = records
    print(f"# one lane (hot_path {args.hot_path}), {args.codec}{'' if args.level is None else f'-{args.level}'}: "
          f"{n:,} {args.kind} records "
          f"({source_bytes / max(1, n):,.0f} B average) in {wall:.1f} s (start-up included), {n / wall:,.0f} records/s"
          f"{f' (sampled by py-spy at {args.rate} Hz, which pauses the process)' if sampler else ''}\n")
    print(parts_table(cpu, n))
    cores = os.cpu_count() or 1
    print(f"\nOver the run ({wall:.1f} s): the machine's {cores} cores were busy {busy / wall / cores:.0%} "
          f"(steal {steal / wall / cores:.0%})"
          + ("" if broker is None else f"; the broker used {broker:.2f} CPU s ({broker / n * 1e6:.2f} per 1M records)")
          + f"; transcoder {sum(cpu.values()):.2f} CPU s.")
    if sampler is not None:
        print()
        print(samples_table(collapsed(raw.read_text().splitlines(), thread="lane-")))


if __name__ == "__main__":
    main()
