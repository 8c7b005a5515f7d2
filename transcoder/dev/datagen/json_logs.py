"""json-logs: journald entries as `journalctl -o json` prints them, of 26 hosts in five roles, keyed by host name."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from transcoder.dev.datagen.clock import micros
from transcoder.dev.datagen.draws import Distribution, zipf
from transcoder.dev.datagen.identifiers import hex_id, pod_suffix, uuid4_text
from transcoder.dev.datagen.journal_units import JournalHost, Unit, journal_units
from transcoder.dev.datagen.stream import Record, StreamContext

_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

# (role, hosts, units and their shares of the host's lines)
_ROLES: list[tuple[str, int, list[tuple[str, float]]]] = [
    ("web", 6, [("ssh", 30), ("kernel", 25), ("systemd", 8), ("cron", 6), ("logind", 2), ("users-api", 25)]),
    ("api", 6, [("orders-api", 60), ("users-api", 20), ("ssh", 8), ("kernel", 5), ("systemd", 4), ("cron", 3),
                ("logind", 1)]),
    ("db", 3, [("postgres", 60), ("ssh", 10), ("kernel", 5), ("systemd", 5), ("cron", 5), ("logind", 1)]),
    ("k8s-node", 8, [("kubelet", 45), ("containerd", 25), ("systemd", 12), ("kernel", 10), ("ssh", 6), ("cron", 2)]),
    ("worker", 3, [("billing", 70), ("ssh", 10), ("kernel", 6), ("systemd", 6), ("cron", 8)]),
]
_SUBNETS = {"web": 1, "api": 2, "db": 3, "k8s-node": 4, "worker": 5}
# (namespace, app, runs as a DaemonSet)
_K8S_APPS = [("orders", "orders-api", False), ("users", "users-api", False), ("payments", "payments-gw", False),
             ("monitoring", "node-exporter", True), ("kube-system", "kube-proxy", True),
             ("ingress-nginx", "ingress-nginx-controller", False), ("logging", "fluent-bit", True)]


def _journal_static(pool: random.Random, host: JournalHost, u: Unit) -> str:
    """The fields journald records for every entry of unit `u` on `host`, as JSON object members."""
    if u.unit is None:
        fields: dict[str, str] = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": "kernel"}
    else:
        slice_ = "-.slice" if u.unit == "init.scope" else "system.slice"
        cgroup = "/init.scope" if u.unit == "init.scope" else f"/system.slice/{u.unit}"
        fields = {
            "_TRANSPORT": u.transport, "SYSLOG_FACILITY": str(u.facility), "SYSLOG_IDENTIFIER": u.identifier,
            "_UID": str(u.uid), "_GID": str(u.uid), "_COMM": u.comm, "_EXE": u.exe, "_CMDLINE": u.cmdline,
            "_CAP_EFFECTIVE": "1ffffffffff" if u.uid == 0 else "0", "_SYSTEMD_CGROUP": cgroup,
            "_SYSTEMD_UNIT": u.unit, "_SYSTEMD_SLICE": slice_, "_SYSTEMD_INVOCATION_ID": hex_id(pool, 32),
        }
    return _JSON.encode(fields)[1:-1]


def _journal_hosts(pool: random.Random, units: dict[str, Unit], first_us: int) -> list[JournalHost]:
    """Every host with its units' processes (and pods on Kubernetes nodes), booted before `first_us`."""
    hosts: list[JournalHost] = []
    for role, count, mix in _ROLES:
        unit_dist = Distribution([units[n] for n, _ in mix], [w for _, w in mix])
        for i in range(1, count + 1):
            h = JournalHost(pool, f"{role}-{i:02d}", f"10.0.{_SUBNETS[role]}.{10 + i}", first_us, unit_dist)
            for un in unit_dist.items:
                pid = 1 if un.unit == "init.scope" else pool.randrange(400, 40_000)
                h.procs[un.unit or "kernel"] = (_journal_static(pool, h, un), pid)
            if role == "k8s-node":
                for _ in range(12):
                    ns, app, daemonset = pool.choice(_K8S_APPS)
                    # Deployment pods carry their ReplicaSet's hash; DaemonSet pods only a suffix.
                    pod = f"{app}-{pod_suffix(pool)}" if daemonset else f"{app}-{hex_id(pool, 9)}-{pod_suffix(pool)}"
                    h.pods.append((ns, pod, uuid4_text(pool), hex_id(pool, 64)))
            hosts.append(h)
    return hosts


def generate_json_logs(ctx: StreamContext) -> Iterator[Record]:
    """journald entries, the hosts taking Zipf-skewed shares of the stream."""
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    units = journal_units(pool, rng)
    # Boot times sit before the stream's first instant; reading it consumes no randomness.
    host_dist = zipf(_journal_hosts(pool, units, int(clock.now) * 1000), 0.6)
    encode = _JSON.encode

    while True:
        times = clock.block()
        for t, h in zip(times, host_dist.block(rng), strict=False):
            ms = int(t)
            us = micros(t, ms)
            un = h.units.pick(rnd)
            priority, template = un.templates.pick(rnd)
            static, daemon_pid = h.procs[un.unit or "kernel"]
            if un.spawns:
                # A fresh process per job or session: the host's pid counter moves on.
                h.next_pid += 1 + int(rnd() * rnd() * 60)
            message = template(h, us)
            h.seq += 1
            mono = us - h.boot_us
            src_us = us - int(20 + rnd() * 400)
            head = (f'{{"__CURSOR":"s={h.seqnum_id};i={h.seq:x};b={h.boot_id};m={mono:x};t={us:x};x={rng.getrandbits(64):x}",'
                    f'"__REALTIME_TIMESTAMP":"{us}","__MONOTONIC_TIMESTAMP":"{mono}","_BOOT_ID":"{h.boot_id}",'
                    f'"_MACHINE_ID":"{h.machine_id}","_HOSTNAME":"{h.name}","PRIORITY":"{priority}",{static}')
            if un.unit is None:
                tail = f',"MESSAGE":{encode(message)},"_SOURCE_MONOTONIC_TIMESTAMP":"{mono - (us - src_us)}"}}'
            else:
                pid = h.next_pid if un.spawns else daemon_pid
                tail = f',"_PID":"{pid}","MESSAGE":{encode(message)},"_SOURCE_REALTIME_TIMESTAMP":"{src_us}"}}'
            yield Record(
                h.name.encode() if keyed else None,
                (head + tail).encode(),
                hdr.make(h.name, trace=True) if hdr is not None else (),
                ms,
            )
