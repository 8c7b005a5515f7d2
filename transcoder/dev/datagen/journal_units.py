"""The journald units behind json-logs and what each logs: sshd, cron, systemd, the kernel, services, Kubernetes."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import NamedTuple

from transcoder.dev.datagen.draws import Distribution, skewed_int, weighted, zipf
from transcoder.dev.datagen.identifiers import (
    hex_id,
    pod_suffix,
    public_ipv4,
    uuid4_text,
)
from transcoder.dev.datagen.timetext import iso_time, klog_time, spaced_time

Pod = tuple[str, str, str, str]  # (namespace, pod, pod uid, container id)


class JournalHost:
    """One machine's journal: its ids, boot time, sequence and pid counters, units, processes and pods."""

    __slots__ = ("boot_id", "boot_us", "ip", "machine_id", "name", "next_pid", "pods", "procs", "seq", "seqnum_id",
                 "session", "units")

    def __init__(self, pool: random.Random, name: str, ip: str, start_us: int,
                 units: Distribution[Unit]) -> None:
        self.name = name
        self.ip = ip
        self.machine_id = hex_id(pool, 32)
        self.boot_id = hex_id(pool, 32)
        self.seqnum_id = hex_id(pool, 32)
        self.boot_us = start_us - pool.randrange(3 * 86_400, 90 * 86_400) * 1_000_000
        self.seq = pool.randrange(100_000, 9_000_000)
        self.next_pid = pool.randrange(20_000, 400_000)
        self.units = units
        self.procs: dict[str, tuple[str, int]] = {}  # unit -> (static JSON fields, daemon pid)
        self.pods: list[Pod] = []
        self.session = pool.randrange(100, 5_000)


Template = Callable[[JournalHost, int], str]  # (host, epoch microseconds) -> MESSAGE
Templates = Distribution[tuple[int, Template]]  # (syslog priority, message template), weighted


class Unit(NamedTuple):
    """A systemd unit (or the kernel) as journald records it, with the messages it logs."""

    unit: str | None  # None: the kernel, which has no unit, pid or credentials
    identifier: str
    comm: str
    exe: str
    cmdline: str
    uid: int
    transport: str
    facility: int
    spawns: bool  # a new pid per job (cron, sshd sessions, postgres backends)
    templates: Templates


_ADMINS = ["ubuntu", "deploy", "ansible", "alice", "bob", "ci-runner"]
_UIDS = {"ubuntu": 1000, "deploy": 1001, "ansible": 1002, "alice": 1003, "bob": 1004, "ci-runner": 1005}
_BAD_USERS = zipf(["admin", "test", "user", "oracle", "postgres", "git", "ubnt", "support", "guest", "ftpuser",
                   "pi", "steam", "hadoop", "debian", "centos", "ec2-user", "jenkins", "validator", "sol",
                   "minecraft", "ts3", "nagios", "es", "dev"], 0.9)
_ADMIN_IPS = zipf([f"10.8.0.{n}" for n in range(2, 14)] + ["203.0.113.45", "198.51.100.23"], 1.0)
_CRON_CMDS = zipf([
    "command -v debian-sa1 > /dev/null && debian-sa1 1 1", "cd / && run-parts --report /etc/cron.hourly",
    "/usr/local/bin/node_exporter_textfile.sh >/dev/null 2>&1", "/usr/local/bin/backup-etc.sh >/dev/null 2>&1",
    "/usr/bin/flock -n /tmp/certbot.lock /usr/bin/certbot renew -q",
    "[ -x /etc/init.d/anacron ] && if [ ! -d /run/systemd/system ]; then /usr/sbin/invoke-rc.d anacron start >/dev/null; fi",
], 1.0)
_DBS = zipf([("orders", "orders_app"), ("users", "users_app"), ("billing", "billing_app"),
             ("analytics", "metabase")], 1.0)
_STATEMENTS = zipf([
    "execute <unnamed>: SELECT o.id, o.status, o.total_cents, o.created_at FROM orders o WHERE o.customer_id = $1 ORDER BY o.created_at DESC LIMIT 50",
    "execute <unnamed>: SELECT * FROM users WHERE id = $1",
    "execute <unnamed>: UPDATE carts SET updated_at = now(), items = $1 WHERE id = $2",
    "execute <unnamed>: INSERT INTO order_items (order_id, product_id, quantity, price_cents) VALUES ($1, $2, $3, $4)",
    "execute <unnamed>: SELECT p.id, p.name, p.price_cents, i.available FROM products p JOIN inventory i ON i.product_id = p.id WHERE p.category = $1 ORDER BY p.rank LIMIT 24 OFFSET $2",
    "statement: SELECT date_trunc('day', created_at) AS day, count(*), sum(total_cents) FROM orders WHERE created_at > now() - interval '30 days' GROUP BY 1 ORDER BY 1",
    "execute <unnamed>: DELETE FROM sessions WHERE expires_at < now()",
    "statement: VACUUM (ANALYZE) public.events",
], 1.1)
_TABLES = zipf(["orders.public.order_items", "orders.public.orders", "users.public.sessions",
                "billing.public.invoices", "orders.public.carts"], 1.0)
_API_PATHS = zipf(["/api/v1/orders/{id}", "/api/v1/orders", "/api/v1/carts/{id}", "/api/v1/orders/{id}/items",
                   "/internal/health"], 1.0)
_STATUSES = weighted([(200, 90), (201, 4), (404, 3), (400, 1.5), (500, 0.7), (503, 0.3)])


class _Vocabulary:
    """What several units' messages draw from: admin users and their keys, attackers, ports, request ids."""

    __slots__ = ("admin_users", "attackers", "fingerprints", "rnd", "rng")

    def __init__(self, pool: random.Random, rng: random.Random) -> None:
        self.rng = rng
        self.rnd = rng.random
        self.admin_users = zipf(_ADMINS, 1.0)
        self.fingerprints = {u: base64.b64encode(pool.randbytes(32)).decode().rstrip("=") for u in _ADMINS}
        self.attackers = zipf([public_ipv4(pool) for _ in range(400)], 1.0)

    def port(self) -> int:
        """An ephemeral client port."""
        return 32_768 + int(self.rnd() * 28_000)

    def request_id(self) -> str:
        """A request's UUID."""
        return uuid4_text(self.rng)

    def a_pod(self, h: JournalHost) -> Pod:
        """One of the host's pods."""
        return h.pods[int(self.rnd() * len(h.pods))]

    def about_a_pod(self, body: Callable[[Pod], str]) -> Callable[[JournalHost], str]:
        """A message `body` about one of the host's pods."""
        return lambda h: body(self.a_pod(h))


def _ssh(v: _Vocabulary) -> Templates:
    rnd, port, admin_users, attackers, fingerprints = v.rnd, v.port, v.admin_users, v.attackers, v.fingerprints
    bad_users, admin_ips, uids = _BAD_USERS, _ADMIN_IPS, _UIDS

    def sshd(fn: Callable[[str, str, str], str]) -> Template:
        # (admin user, attacker IP, admin IP), drawn for every message whether it names them or not.
        return lambda h, us: fn(admin_users.pick(rnd), attackers.pick(rnd), admin_ips.pick(rnd))

    return weighted([
        ((6, sshd(lambda u, a, i: f"Invalid user {bad_users.pick(rnd)} from {a} port {port()}")), 25),
        ((6, sshd(lambda u, a, i: f"Connection closed by invalid user {bad_users.pick(rnd)} {a} port {port()} [preauth]")), 20),
        ((6, sshd(lambda u, a, i: f"Received disconnect from {a} port {port()}:11: Bye Bye [preauth]")), 10),
        ((6, sshd(lambda u, a, i: f"Disconnected from invalid user {bad_users.pick(rnd)} {a} port {port()} [preauth]")), 8),
        ((6, sshd(lambda u, a, i: f"Connection closed by authenticating user root {a} port {port()} [preauth]")), 6),
        ((6, sshd(lambda u, a, i: f"Accepted publickey for {u} from {i} port {port()} ssh2: ED25519 SHA256:{fingerprints[u]}")), 4),
        ((6, sshd(lambda u, a, i: f"pam_unix(sshd:session): session opened for user {u}(uid={uids[u]}) by (uid=0)")), 4),
        ((6, sshd(lambda u, a, i: f"pam_unix(sshd:session): session closed for user {u}")), 3),
        ((6, sshd(lambda u, a, i: f"Received disconnect from {i} port {port()}:11: disconnected by user")), 3),
        ((6, sshd(lambda u, a, i: f"Disconnected from user {u} {i} port {port()}")), 3),
        ((3, sshd(lambda u, a, i: "error: kex_exchange_identification: Connection closed by remote host")), 3),
        ((6, sshd(lambda u, a, i: f"banner exchange: Connection from {a} port {port()}: invalid format")), 3),
        ((6, sshd(lambda u, a, i: f"Unable to negotiate with {a} port {port()}: no matching host key type found. Their offer: ssh-rsa,ssh-dss [preauth]")), 2),
        ((3, sshd(lambda u, a, i: "error: kex_exchange_identification: read: Connection reset by peer")), 2),
        ((3, sshd(lambda u, a, i: f"fatal: Timeout before authentication for {a} port {port()}")), 1),
    ])


def _cron(v: _Vocabulary) -> Templates:
    rnd, cron_cmds = v.rnd, _CRON_CMDS
    return weighted([
        ((6, lambda h, us: "pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)"), 30),
        ((6, lambda h, us: f"(root) CMD ({cron_cmds.pick(rnd)})"), 30),
        ((6, lambda h, us: "pam_unix(cron:session): session closed for user root"), 30),
        ((6, lambda h, us: "(deploy) CMD (/opt/app/bin/cleanup-sessions --older-than 24h)"), 3),
    ])


def _systemd(v: _Vocabulary) -> Templates:
    rnd, rng, admin_users, uids = v.rnd, v.rng, v.admin_users, _UIDS

    def session_started(h: JournalHost, us: int) -> str:
        h.session += 1
        u = admin_users.pick(rnd)
        return f"Started session-{h.session}.scope - Session {h.session} of User {u}."

    return weighted([
        ((6, session_started), 8),
        ((6, lambda h, us: f"session-{h.session}.scope: Deactivated successfully."), 8),
        ((6, lambda h, us: "Starting sysstat-collect.service - system activity accounting tool..."), 10),
        ((6, lambda h, us: "sysstat-collect.service: Deactivated successfully."), 10),
        ((6, lambda h, us: "Finished sysstat-collect.service - system activity accounting tool."), 10),
        ((6, lambda h, us: "Starting logrotate.service - Rotate log files..."), 2),
        ((6, lambda h, us: "logrotate.service: Deactivated successfully."), 2),
        ((6, lambda h, us: "Finished logrotate.service - Rotate log files."), 2),
        ((6, lambda h, us: f"apt-daily.service: Consumed {rnd() * 4:.3f}s CPU time."), 1),
        ((6, lambda h, us: "Starting apt-daily.service - Daily apt download activities..."), 1),
        ((6, lambda h, us: f"Created slice user-{uids[admin_users.pick(rnd)]}.slice - User Slice of UID {uids[admin_users.pick(rnd)]}."), 1),
        ((6, lambda h, us: "Started fwupd-refresh.service - Refresh fwupd metadata and update motd."), 0.3),
        ((6, lambda h, us: (f"run-containerd-runc-k8s.io-{h.pods[int(rnd() * len(h.pods))][3]}-runc.{pod_suffix(rng)}.mount: Deactivated successfully."
                            if h.pods else "tmp.mount: Deactivated successfully.")), 4),
    ])


def _logind(v: _Vocabulary) -> Templates:
    rnd, admin_users = v.rnd, v.admin_users
    return weighted([
        ((6, lambda h, us: f"New session {h.session} of user {admin_users.pick(rnd)}."), 4),
        ((6, lambda h, us: f"Session {h.session} logged out. Waiting for processes to exit."), 3),
        ((6, lambda h, us: f"Removed session {h.session}."), 3),
    ])


def _kernel(v: _Vocabulary) -> Templates:
    rnd, rng, port, attackers = v.rnd, v.rng, v.port, v.attackers

    def ufw(h: JournalHost, us: int) -> str:
        dport = (23, 22, 3389, 445, 8080, 5900, 6379, 9200, 2375, 8443)[int(rnd() * rnd() * 10)]
        return (f"[UFW BLOCK] IN=ens5 OUT= MAC=0a:8f:3c:{h.machine_id[:2]}:{h.machine_id[2:4]}:{h.machine_id[4:6]}:"
                f"0a:c1:7d:55:2e:91:08:00 SRC={attackers.pick(rnd)} DST={h.ip} LEN={(40, 44, 60)[int(rnd() * 3)]} "
                f"TOS=0x00 PREC=0x00 TTL={int(30 + rnd() * 220)} ID={int(rnd() * 65535)} PROTO=TCP "
                f"SPT={port()} DPT={dport} WINDOW={(1024, 65535, 29200)[int(rnd() * 3)]} RES=0x00 SYN URGP=0")

    return weighted([
        ((4, ufw), 60),
        ((4, lambda h, us: "TCP: request_sock_TCP: Possible SYN flooding on port 443. Sending cookies.  Check SNMP counters."), 2),
        ((6, lambda h, us: f"IPv6: ADDRCONF(NETDEV_CHANGE): veth{hex_id(rng, 8)}: link becomes ready"), 3),
        ((6, lambda h, us: f"cni0: port {int(1 + rnd() * 30)}(veth{hex_id(rng, 8)}) entered forwarding state"), 3),
        ((4, lambda h, us: "nf_conntrack: nf_conntrack: table full, dropping packet"), 0.5),
        ((3, lambda h, us: (f"Memory cgroup out of memory: Killed process {h.next_pid} (python3) total-vm:{int(900_000 + rnd() * 400_000)}kB, "
                            f"anon-rss:{int(500_000 + rnd() * 20_000)}kB, file-rss:{int(rnd() * 40_000)}kB, shmem-rss:0kB, UID:1000 "
                            f"pgtables:{int(1200 + rnd() * 400)}kB oom_score_adj:{(985, 999, 1000)[int(rnd() * 3)]}")), 0.3),
    ])


def _orders_api(v: _Vocabulary) -> Templates:
    rnd, rng, port, req_id, api_paths, statuses = v.rnd, v.rng, v.port, v.request_id, _API_PATHS, _STATUSES

    def iso_ms(us: int) -> str:
        return f"{iso_time(us // 1_000_000)}.{(us // 1000) % 1000:03d}Z"

    def orders_api(level: str) -> Template:
        def f(h: JournalHost, us: int) -> str:
            head = f"time={iso_ms(us)} level={level}"
            if level == "INFO":
                path = api_paths.pick(rnd).replace("{id}", str(4_812_000 - skewed_int(rnd, 90_000)))
                status = statuses.pick(rnd)
                method = "POST" if path == "/api/v1/orders" else "GET"
                return (f'{head} msg="request completed" method={method} path={path} status={status} '
                        f"duration={2 + 40 * rnd() * rnd():.3f}ms bytes={int(200 + rnd() * 4000)} request_id={req_id()} "
                        f"remote_addr=10.0.{int(rnd() * 4)}.{int(2 + rnd() * 250)}:{port()}")
            if level == "WARN":
                return (f'{head} msg="slow query" query="SELECT id, status, total_cents FROM orders WHERE customer_id = $1 '
                        f'ORDER BY created_at DESC LIMIT 50" duration={250 + rnd() * 2000:.1f}ms request_id={req_id()}')
            return (f'{head} msg="payment provider error" provider=stripe error="context deadline exceeded" '
                    f"order_id=ord_{hex_id(rng, 14)} attempt={1 + int(rnd() * 3)} request_id={req_id()}")
        return f

    return weighted([((6, orders_api("INFO")), 85), ((4, orders_api("WARN")), 4), ((3, orders_api("ERROR")), 1.5)])


def _users_api(v: _Vocabulary) -> Templates:
    rnd, statuses = v.rnd, _STATUSES

    def pino(level: int, msg: str, extra: Callable[[], str]) -> Template:
        def f(h: JournalHost, us: int) -> str:
            return (f'{{"level":{level},"time":{us // 1000},"pid":{h.procs["users-api.service"][1] if "users-api.service" in h.procs else 1},'
                    f'"hostname":"{h.name}",{extra()},"msg":"{msg}"}}')
        return f

    def users_req() -> str:
        uid = skewed_int(rnd, 250_000)
        status = statuses.pick(rnd)
        return (f'"reqId":"req-{int(rnd() * 0xFFFFFF):x}","req":{{"method":"GET","url":"/v1/users/{uid}",'
                f'"remoteAddress":"10.0.{int(rnd() * 4)}.{int(2 + rnd() * 250)}"}},"res":{{"statusCode":{status}}},'
                f'"responseTime":{1 + 30 * rnd() * rnd():.3f}')

    return weighted([
        ((6, pino(30, "request completed", users_req)), 75),
        ((6, pino(30, "session refreshed", lambda: f'"userId":"user-{skewed_int(rnd, 50_000):06d}"')), 10),
        ((4, pino(40, "rate limit approaching", lambda: f'"userId":"user-{skewed_int(rnd, 50_000):06d}","remaining":{int(rnd() * 10)}')), 5),
        ((3, pino(50, "redis connection failed", lambda: (
            '"err":{"type":"Error","message":"connect ECONNREFUSED 10.0.4.21:6379","stack":"Error: connect '
            'ECONNREFUSED 10.0.4.21:6379\\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1610:16)"}'))), 1.5),
    ])


def _billing(v: _Vocabulary) -> Templates:
    rnd, rng = v.rnd, v.rng

    def billing_line(level: str) -> Template:
        def f(h: JournalHost, us: int) -> str:
            stamp = f"{spaced_time(us // 1_000_000)},{(us // 1000) % 1000:03d}"
            if level == "INFO":
                return (f"{stamp} INFO billing.worker: processed invoice inv_{hex_id(rng, 12)} "
                        f"customer=cus_{skewed_int(rnd, 250_000)} amount={5 + rnd() * 300:.2f} EUR in {rnd() * 0.8:.3f}s")
            if level == "WARNING":
                return f"{stamp} WARNING billing.worker: retrying charge for invoice inv_{hex_id(rng, 12)} (attempt 2/5): card_declined"
            return (f"{stamp} ERROR billing.worker: webhook delivery failed: HTTPSConnectionPool(host='hooks.example-shop.com', "
                    "port=443): Read timed out. (read timeout=10)")
        return f

    return weighted([((6, billing_line("INFO")), 90), ((4, billing_line("WARNING")), 6), ((3, billing_line("ERROR")), 1)])


def _postgres(v: _Vocabulary) -> Templates:
    rnd, rng, port, dbs, statements, tables = v.rnd, v.rng, v.port, _DBS, _STATEMENTS, _TABLES

    def pg(body: Template, user_db: bool = True) -> Template:
        def f(h: JournalHost, us: int) -> str:
            stamp = f"{spaced_time(us // 1_000_000)}.{(us // 1000) % 1000:03d} UTC [{h.next_pid}]"
            if user_db:
                db, user = dbs.pick(rnd)
                return f"{stamp} {user}@{db} {body(h, us)}"
            return f"{stamp} {body(h, us)}"
        return f

    return weighted([
        ((6, pg(lambda h, us: f"LOG:  duration: {100 + 3000 * rnd() * rnd():.3f} ms  {statements.pick(rnd)}")), 30),
        ((6, pg(lambda h, us: f"LOG:  connection received: host=10.0.{int(rnd() * 4)}.{int(2 + rnd() * 250)} port={port()}", False)), 15),
        ((6, pg(lambda h, us: "LOG:  connection authorized: SSL enabled (protocol=TLSv1.3, cipher=TLS_AES_256_GCM_SHA384, bits=256)")), 15),
        ((6, pg(lambda h, us: f"LOG:  disconnection: session time: 0:{int(rnd() * 60):02d}:{rnd() * 60:06.3f} host=10.0.{int(rnd() * 4)}.{int(2 + rnd() * 250)} port={port()}")), 12),
        ((6, pg(lambda h, us: (f'LOG:  automatic analyze of table "{tables.pick(rnd)}"\n\tavg read rate: {rnd() * 40:.3f} MB/s, '
                               f"avg write rate: {rnd() * 2:.3f} MB/s\n\tbuffer usage: {int(rnd() * 9000)} hits, {int(rnd() * 300)} misses, "
                               f"{int(rnd() * 50)} dirtied\n\tsystem usage: CPU: user: {rnd() * 0.3:.2f} s, system: {rnd() * 0.05:.2f} s, "
                               f"elapsed: {rnd() * 1.2:.2f} s"), False)), 4),
        ((6, pg(lambda h, us: "LOG:  checkpoint starting: time", False)), 2),
        ((6, pg(lambda h, us: (f"LOG:  checkpoint complete: wrote {int(rnd() * 9000)} buffers ({rnd() * 12:.1f}%); 0 WAL file(s) added, "
                               f"0 removed, {int(rnd() * 4)} recycled; write={rnd() * 270:.3f} s, sync={rnd() * 0.05:.3f} s, "
                               f"total={270 + rnd() * 0.1:.3f} s; sync files={int(rnd() * 80)}, longest={rnd() * 0.01:.3f} s, "
                               f"average=0.001 s; distance={int(rnd() * 90_000)} kB, estimate={int(60_000 + rnd() * 40_000)} kB; "
                               f"lsn=3A/{hex_id(rng, 8).upper()}, redo lsn=3A/{hex_id(rng, 8).upper()}"), False)), 2),
        ((4, pg(lambda h, us: 'ERROR:  duplicate key value violates unique constraint "users_email_key"')), 1.5),
        ((3, pg(lambda h, us: 'FATAL:  password authentication failed for user "metabase"')), 0.5),
    ])


def _kubelet(v: _Vocabulary) -> Templates:
    rng, about_a_pod = v.rng, v.about_a_pod

    def klog(sev: str, src: str, body: Callable[[JournalHost], str]) -> Template:
        def f(h: JournalHost, us: int) -> str:
            pid = h.procs["kubelet.service"][1]
            return f"{sev}{klog_time(us // 1_000_000)}.{us % 1_000_000:06d} {pid:>7} {src}] {body(h)}"
        return f

    return weighted([
        ((6, klog("I", "kubelet.go:2431", about_a_pod(lambda p: f'"SyncLoop (probe)" probe="readiness" status="ready" pod="{p[0]}/{p[1]}"'))), 25),
        ((6, klog("I", "kubelet.go:2469", about_a_pod(lambda p: f'"SyncLoop (PLEG): event for pod" pod="{p[0]}/{p[1]}" event={{"ID":"{p[2]}","Type":"ContainerStarted","Data":"{p[3]}"}}'))), 6),
        ((4, klog("I", "prober.go:107", about_a_pod(lambda p: f'"Probe failed" probeType="Readiness" pod="{p[0]}/{p[1]}" podUID="{p[2]}" containerName="app" probeResult="failure" output="Get \\"http://10.244.3.17:8080/ready\\": dial tcp 10.244.3.17:8080: connect: connection refused"'))), 6),
        ((3, klog("E", "pod_workers.go:1301", about_a_pod(lambda p: f'"Error syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"app\\" with CrashLoopBackOff: \\"back-off 5m0s restarting failed container=app pod={p[1]}_{p[0]}({p[2]})\\"" pod="{p[0]}/{p[1]}" podUID="{p[2]}"'))), 3),
        ((6, klog("I", "scope.go:117", lambda h: f'"RemoveContainer" containerID="{hex_id(rng, 64)}"')), 3),
        ((6, klog("I", "kubelet_volumes.go:163", about_a_pod(lambda p: f'"Cleaned up orphaned pod volumes dir" podUID="{p[2]}" path="/var/lib/kubelet/pods/{p[2]}/volumes"'))), 2),
        ((4, klog("W", "reflector.go:561", lambda h: 'object-"orders"/"orders-api-config": failed to list *v1.ConfigMap: configmaps "orders-api-config" is forbidden: User "system:node:k8s-node" cannot list resource "configmaps" in API group "" in the namespace "orders": no relationship found between node and this object')), 0.5),
    ])


def _containerd(v: _Vocabulary) -> Templates:
    rnd, rng, a_pod, about_a_pod = v.rnd, v.rng, v.a_pod, v.about_a_pod

    def ctrd(level: str, body: Callable[[JournalHost], str]) -> Template:
        def f(h: JournalHost, us: int) -> str:
            ns = us * 1000 + int(rnd() * 1000)
            return f'time="{iso_time(us // 1_000_000)}.{ns % 1_000_000_000:09d}Z" level={level} {body(h)}'
        return f

    return weighted([
        ((6, ctrd("info", lambda h: f'msg="StartContainer for \\"{a_pod(h)[3]}\\" returns successfully"')), 6),
        ((6, ctrd("info", lambda h: f"msg=\"shim disconnected\" id={a_pod(h)[3]} namespace=k8s.io")), 5),
        ((4, ctrd("warning", lambda h: f"msg=\"cleaning up after shim disconnected\" id={a_pod(h)[3]} namespace=k8s.io")), 5),
        ((6, ctrd("info", lambda h: 'msg="ImageCreate event name:\\"docker.io/library/nginx:1.27.3\\" labels:{key:\\"io.cri-containerd.image\\" value:\\"managed\\"}"')), 2),
        ((6, ctrd("info", about_a_pod(lambda p: f'msg="RunPodSandbox for &PodSandboxMetadata{{Name:{p[1]},Uid:{p[2]},Namespace:{p[0]},Attempt:0,}} returns sandbox id \\"{p[3]}\\""'))), 2),
        ((6, ctrd("info", lambda h: f'msg="RemoveContainer for \\"{hex_id(rng, 64)}\\" returns successfully"')), 3),
    ])


# Each unit's process as journald records it (unit, identifier, comm, exe, cmdline, uid, transport, facility,
# spawns) and the builder of its messages.
_Process = tuple[str | None, str, str, str, str, int, str, int, bool]
_UNITS: dict[str, tuple[_Process, Callable[[_Vocabulary], Templates]]] = {
    "ssh": (("ssh.service", "sshd", "sshd", "/usr/sbin/sshd", "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
             0, "syslog", 4, True), _ssh),
    "cron": (("cron.service", "CRON", "cron", "/usr/sbin/cron", "/usr/sbin/cron -f -P", 0, "syslog", 10, True), _cron),
    "systemd": (("init.scope", "systemd", "systemd", "/usr/lib/systemd/systemd", "/sbin/init", 0, "journal", 3,
                 False), _systemd),
    "logind": (("systemd-logind.service", "systemd-logind", "systemd-logind", "/usr/lib/systemd/systemd-logind",
                "/usr/lib/systemd/systemd-logind", 0, "journal", 4, False), _logind),
    "kernel": ((None, "kernel", "", "", "", 0, "kernel", 0, False), _kernel),
    "orders-api": (("orders-api.service", "orders-api", "orders-api", "/opt/orders-api/bin/orders-api",
                    "/opt/orders-api/bin/orders-api --config /etc/orders-api/config.yaml", 998, "stdout", 3, False),
                    _orders_api),
    "users-api": (("users-api.service", "users-api", "node", "/usr/bin/node",
                   "/usr/bin/node --enable-source-maps /srv/users-api/dist/server.js", 997, "stdout", 3, False),
                   _users_api),
    "billing": (("billing-worker.service", "billing-worker", "python3", "/usr/bin/python3.12",
                 "/srv/billing/.venv/bin/python3 -m billing.worker --queue invoices", 996, "stdout", 3, False),
                 _billing),
    "postgres": (("postgresql@16-main.service", "postgres", "postgres", "/usr/lib/postgresql/16/bin/postgres",
                  "postgres: 16/main: checkpointer", 113, "stdout", 3, True), _postgres),
    "kubelet": (("kubelet.service", "kubelet", "kubelet", "/usr/bin/kubelet",
                 "/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
                 0, "stdout", 3, False), _kubelet),
    "containerd": (("containerd.service", "containerd", "containerd", "/usr/bin/containerd", "/usr/bin/containerd",
                    0, "stdout", 3, False), _containerd),
}


def journal_units(pool: random.Random, rng: random.Random) -> dict[str, Unit]:
    """Every unit by short name; `pool` draws the admins' keys and the attackers, `rng` every message."""
    v = _Vocabulary(pool, rng)
    return {name: Unit(*process, build(v)) for name, (process, build) in _UNITS.items()}
