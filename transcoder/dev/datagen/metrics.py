"""metrics: Telegraf-style InfluxDB line protocol of 24 hosts in five roles, keyed by host name."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from transcoder.dev.datagen.stream import Record, StreamContext


def _go_float(v: float) -> str:
    """A float as Go's strconv.FormatFloat(v, 'f', -1, 64) writes it: shortest digits, no exponent."""
    s = repr(v)
    if "e" in s:
        s = format(v, ".17f").rstrip("0").rstrip(".")
    elif s.endswith(".0"):
        s = s[:-2]
    return s


class _Walk:
    """Mean-reverting random walk: consecutive values stay close, long-run values stay plausible."""

    __slots__ = ("hi", "lo", "mu", "sigma", "theta", "v")

    def __init__(self, v: float, mu: float, sigma: float, lo: float, hi: float, theta: float = 0.05) -> None:
        self.v, self.mu, self.sigma, self.lo, self.hi, self.theta = v, mu, sigma, lo, hi, theta

    def step(self, rnd: Callable[[], float]) -> float:
        """The next value: pulled towards mu, jittered by up to sigma, kept within [lo, hi]."""
        v = self.v + self.theta * (self.mu - self.v) + self.sigma * (rnd() + rnd() - 1.0)
        # Not min(): a call costs ~0.1 µs a step, and every metrics record takes several steps.
        v = self.lo if v < self.lo else self.hi if v > self.hi else v
        self.v = v
        return v


class _Counter:
    """A monotone counter whose rate itself drifts."""

    __slots__ = ("n", "rate")

    def __init__(self, n: int, rate: _Walk) -> None:
        self.n, self.rate = n, rate

    def step(self, rnd: Callable[[], float], dt: float) -> int:
        """The count `dt` seconds later."""
        self.n += int(self.rate.step(rnd) * dt)
        return self.n


Series = Callable[[float], str]  # seconds since this series last reported -> "measurement,tags fields"
# (role, hosts, CPUs, memory in GB)
_LAYOUT = (("web", 6, 4, 8), ("api", 6, 8, 16), ("db", 3, 16, 64), ("k8s-node", 6, 8, 32), ("worker", 3, 4, 8))
_LOAD = {"web": 18.0, "api": 32.0, "db": 24.0, "k8s-node": 45.0, "worker": 55.0}  # busy CPU, %
_NET_SCALE = {"web": 4.0, "api": 3.0, "db": 2.0, "k8s-node": 5.0, "worker": 0.5}
_HTTP_SERVICE = {"web": "storefront", "api": "orders-api", "k8s-node": "ingress"}
# (method, status, share of the requests)
_HTTP_OUTCOMES = (("GET", 200, 1.0), ("GET", 304, 0.08), ("POST", 201, 0.1), ("GET", 404, 0.03),
                  ("POST", 400, 0.01), ("GET", 500, 0.004))


class _Host:
    """One host as its series see it: tags, size and role, `pool` for one-off parameters, `rnd` for values."""

    __slots__ = ("cpus", "load", "mem_gb", "name", "pool", "region", "rnd", "role")

    def __init__(self, pool: random.Random, rnd: Callable[[], float], name: str, region: str, role: str,
                 cpus: int, mem_gb: int) -> None:
        self.pool, self.rnd, self.name, self.region, self.role = pool, rnd, name, region, role
        self.cpus, self.mem_gb, self.load = cpus, mem_gb, _LOAD[role]

    def key(self, measurement: str, **extra: str) -> str:
        """The series key: measurement and tags, sorted by key as Telegraf writes them."""
        tags = {"host": self.name, "region": self.region, **extra}
        return measurement + "".join(f",{k}={tags[k]}" for k in sorted(tags))

    def counter(self, rate: float, start: float) -> _Counter:
        """A counter near `start` (times 0.5 to 1.5) growing by about `rate` per second."""
        return _Counter(int(start * self.pool.uniform(0.5, 1.5)), _Walk(rate, rate, rate * 0.05, 0.0, rate * 5))


def _cpu(h: _Host, name: str) -> Series:
    pool, rnd, role, load, series_key = h.pool, h.rnd, h.role, h.load, h.key
    user = _Walk(load * pool.uniform(0.6, 1.1), load * pool.uniform(0.6, 1.1), 1.8, 0.0, 95.0)
    system = _Walk(load * 0.2, load * 0.2, 0.5, 0.0, 40.0)
    iowait = _Walk(0.6, 0.6 if role != "db" else 3.0, 0.3, 0.0, 30.0)
    softirq = _Walk(0.4, 0.4, 0.1, 0.0, 5.0)
    steal = _Walk(0.1, 0.1, 0.05, 0.0, 3.0)
    prefix = series_key("cpu", cpu=name) + " "

    def render(dt: float) -> str:
        us, sy, io, si, st = user.step(rnd), system.step(rnd), iowait.step(rnd), softirq.step(rnd), steal.step(rnd)
        idle = max(0.0, 100.0 - us - sy - io - si - st)
        return (f"{prefix}usage_guest=0,usage_guest_nice=0,usage_idle={_go_float(idle)},usage_iowait={_go_float(io)},"
                f"usage_irq=0,usage_nice=0,usage_softirq={_go_float(si)},usage_steal={_go_float(st)},"
                f"usage_system={_go_float(sy)},usage_user={_go_float(us)}")
    return render


def _mem(h: _Host) -> Series:
    pool, rnd, mem_gb, series_key = h.pool, h.rnd, h.mem_gb, h.key
    total = mem_gb * 1024 ** 3
    used = _Walk(total * pool.uniform(0.3, 0.7), total * pool.uniform(0.3, 0.7), total * 0.004, total * 0.1, total * 0.92)
    cached = _Walk(total * 0.2, total * 0.2, total * 0.002, total * 0.02, total * 0.5)

    mem_key = series_key("mem")

    def mem(dt: float) -> str:
        u, c = int(used.step(rnd)), int(cached.step(rnd))
        buffered = int(total * 0.012)
        free = max(0, total - u - c - buffered)
        available = free + int(c * 0.85) + buffered
        return (f"{mem_key} active={int(u * 0.8)}i,available={available}i,available_percent={_go_float(available * 100 / total)},"
                f"buffered={buffered}i,cached={c}i,free={free}i,inactive={int(c * 0.6)}i,total={total}i,used={u}i,"
                f"used_percent={_go_float(u * 100 / total)}")
    return mem


def _disk(h: _Host, path: str, device: str, size_gb: int) -> Series:
    pool, rnd, series_key = h.pool, h.rnd, h.key
    dtotal = size_gb * 1_000_000_000
    dused = _Walk(dtotal * pool.uniform(0.2, 0.7), dtotal * 0.6, dtotal * 0.00002, dtotal * 0.05, dtotal * 0.98, 0.0005)
    inodes_total = size_gb * 65_536
    prefix = series_key("disk", device=device, fstype="ext4", mode="rw", path=path) + " "

    def render(dt: float) -> str:
        u = int(dused.step(rnd))
        free = dtotal - u
        iu = int(u / 40_000)
        return (f"{prefix}free={free}i,inodes_free={inodes_total - iu}i,inodes_total={inodes_total}i,inodes_used={iu}i,"
                f"total={dtotal}i,used={u}i,used_percent={_go_float(u * 100 / dtotal)}")
    return render


def _diskio(h: _Host) -> Series:
    rnd, role, series_key, counter = h.rnd, h.role, h.key, h.counter
    io_scale = 8.0 if role == "db" else 1.0
    reads, writes = counter(40 * io_scale, 4e7), counter(120 * io_scale, 9e7)
    rbytes, wbytes = counter(1.6e6 * io_scale, 2e12), counter(3.1e6 * io_scale, 5e12)
    rtime, wtime, iotime = counter(30 * io_scale, 3e7), counter(260 * io_scale, 2e8), counter(120 * io_scale, 1e8)
    inflight = _Walk(0.0, 0.3, 0.4, 0.0, 12.0, 0.3)

    diskio_key = series_key("diskio", name="nvme0n1")

    def diskio(dt: float) -> str:
        r, w, it = reads.step(rnd, dt), writes.step(rnd, dt), iotime.step(rnd, dt)
        return (f"{diskio_key} io_time={it}i,iops_in_progress={int(inflight.step(rnd))}i,merged_reads=0i,"
                f"merged_writes={w // 9}i,read_bytes={rbytes.step(rnd, dt)}i,read_time={rtime.step(rnd, dt)}i,reads={r}i,"
                f"weighted_io_time={it * 2}i,write_bytes={wbytes.step(rnd, dt)}i,write_time={wtime.step(rnd, dt)}i,writes={w}i")
    return diskio


def _net(h: _Host) -> Series:
    rnd, series_key, counter = h.rnd, h.key, h.counter
    net_scale = _NET_SCALE[h.role]
    brecv, bsent = counter(2.2e6 * net_scale, 4e12), counter(4.8e6 * net_scale, 9e12)
    precv, psent = counter(2600 * net_scale, 6e9), counter(2900 * net_scale, 7e9)
    drops = counter(0.01, 2000)

    net_key = series_key("net", interface="ens5")

    def net(dt: float) -> str:
        return (f"{net_key} bytes_recv={brecv.step(rnd, dt)}i,bytes_sent={bsent.step(rnd, dt)}i,"
                f"drop_in={drops.step(rnd, dt)}i,drop_out=0i,err_in=0i,err_out=0i,packets_recv={precv.step(rnd, dt)}i,"
                f"packets_sent={psent.step(rnd, dt)}i")
    return net


def _system(h: _Host) -> Series:
    pool, rnd, cpus, load, series_key = h.pool, h.rnd, h.cpus, h.load, h.key
    l1 = _Walk(cpus * load / 100, cpus * load / 100, 0.08 * cpus, 0.0, cpus * 4.0, 0.1)
    l5 = _Walk(l1.v, l1.v, 0.03 * cpus, 0.0, cpus * 4.0, 0.1)
    l15 = _Walk(l1.v, l1.v, 0.01 * cpus, 0.0, cpus * 4.0, 0.1)
    uptime0 = pool.randrange(3 * 86_400, 200 * 86_400)
    elapsed = [0.0]
    users = pool.randrange(0, 3)

    system_key = series_key("system")

    def system(dt: float) -> str:
        elapsed[0] += dt
        return (f"{system_key} load1={_go_float(round(l1.step(rnd), 2))},load15={_go_float(round(l15.step(rnd), 2))},"
                f"load5={_go_float(round(l5.step(rnd), 2))},n_cpus={cpus}i,n_unique_users={users}i,n_users={users}i,"
                f"uptime={uptime0 + int(elapsed[0])}i")
    return system


def _processes(h: _Host) -> Series:
    rnd, cpus, series_key = h.rnd, h.cpus, h.key
    sleeping = _Walk(280.0, 280.0, 3.0, 150.0, 600.0)
    threads = _Walk(900.0, 900.0, 8.0, 400.0, 3000.0)

    processes_key = series_key("processes")

    def processes(dt: float) -> str:
        running, s = int(rnd() * 4), int(sleeping.step(rnd))
        idle = 80 + cpus * 2
        return (f"{processes_key} blocked=0i,dead=0i,idle={idle}i,paging=0i,running={running}i,sleeping={s}i,"
                f"stopped=0i,total={running + s + idle}i,total_threads={int(threads.step(rnd))}i,unknown=0i,zombies=0i")
    return processes


def _http(h: _Host, service: str, method: str, status: int, share: float) -> Series:
    rnd = h.rnd
    count = h.counter(180 * share, 4e8 * share)
    p50 = _Walk(18.0, 18.0, 0.6, 2.0, 200.0)
    p95 = _Walk(85.0, 85.0, 3.0, 20.0, 900.0)
    p99 = _Walk(240.0, 240.0, 9.0, 50.0, 3000.0)
    prefix = h.key("http_requests", method=method, service=service, status=str(status)) + " "

    def http(dt: float) -> str:
            return (f"{prefix}count={count.step(rnd, dt)}i,duration_p50_ms={_go_float(round(p50.step(rnd), 3))},"
                    f"duration_p95_ms={_go_float(round(p95.step(rnd), 3))},duration_p99_ms={_go_float(round(p99.step(rnd), 3))}")
    return http


def _metric_series(h: _Host) -> list[Series]:
    """Every series of host `h`, in the order Telegraf reports them."""
    out = [_cpu(h, "cpu-total"), *(_cpu(h, f"cpu{i}") for i in range(h.cpus)), _mem(h), _disk(h, "/", "nvme0n1p1", 100)]
    if h.role == "db":
        out.append(_disk(h, "/var/lib/postgresql", "nvme1n1", 1000))
    elif h.role == "k8s-node":
        out.append(_disk(h, "/var/lib/containerd", "nvme1n1", 200))
    out += [_diskio(h), _net(h), _system(h), _processes(h)]
    service = _HTTP_SERVICE.get(h.role)
    if service:
        out += [_http(h, service, method, status, share) for method, status, share in _HTTP_OUTCOMES]
    return out


def generate_metrics(ctx: StreamContext) -> Iterator[Record]:
    """Line-protocol points, a host's series together; the hosts take turns in a fixed order."""
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    hosts: list[tuple[str, bytes, list[Series], list[float]]] = []
    for role, count, cpus, mem_gb in _LAYOUT:
        for i in range(1, count + 1):
            name = f"{role}-{i:02d}"
            region = "us-east-1" if i % 3 == 0 else "eu-west-1"
            series = _metric_series(_Host(pool, rnd, name, region, role, cpus, mem_gb))
            hosts.append((name, name.encode(), series, [-1.0] * len(series)))
    # Telegraf reports a host's series together; hosts take turns in a fixed order.
    order = list(range(len(hosts)))
    pool.shuffle(order)
    turn = 0
    queue: list[tuple[int, int]] = []
    qi = 0

    while True:
        times = clock.block()
        for t in times:
            if qi == len(queue):
                h = order[turn % len(order)]
                turn += 1
                queue = [(h, s) for s in range(len(hosts[h][2]))]
                qi = 0
            h, s = queue[qi]
            qi += 1
            name, name_b, series, last = hosts[h]
            ms = int(t)
            dt = 10.0 if last[s] < 0 else (t - last[s]) / 1000.0
            last[s] = t
            value = f"{series[s](dt)} {ms * 1_000_000}".encode()
            yield Record(name_b if keyed else None, value, hdr.make(name) if hdr is not None else (), ms)
