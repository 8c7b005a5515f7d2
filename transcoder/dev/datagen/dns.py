"""dns: CoreDNS `log` plugin lines with the RFC 3339 time a container runtime prefixes, keyed by client IP."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import NamedTuple

from transcoder.dev.datagen.draws import (
    TABLE_SIZE,
    Distribution,
    normal_table,
    weighted,
    zipf,
)
from transcoder.dev.datagen.identifiers import pod_suffix
from transcoder.dev.datagen.stream import Record, StreamContext
from transcoder.dev.datagen.timetext import PerSecondText, iso_time


class DnsAnswer(NamedTuple):
    """A question and how it was answered."""

    name: str
    qtype: str
    rcode: str
    flags: str
    answer_bytes: int  # added to the request size to make the response size
    upstream: bool  # forwarded (milliseconds) rather than answered from cache or zone (microseconds)


_RR_BYTES = {"A": 16, "AAAA": 28, "CNAME": 40, "MX": 30, "TXT": 120, "PTR": 45, "SRV": 60, "HTTPS": 70, "NS": 25}
_SOA_BYTES = 93
_NAMESPACES = ("default", "orders", "users", "payments", "monitoring", "kube-system", "ingress-nginx", "logging")
_SERVICES = zipf([
    ("orders-api", "orders"), ("users-api", "users"), ("redis-master", "orders"), ("postgres-primary", "orders"),
    ("kubernetes", "default"), ("payments-gw", "payments"), ("prometheus-operated", "monitoring"),
    ("kafka-bootstrap", "default"), ("elasticsearch-master", "logging"), ("users-db", "users"),
    ("alertmanager-operated", "monitoring"), ("kube-dns", "kube-system"), ("ingress-nginx-controller", "ingress-nginx"),
    ("loki-gateway", "logging"), ("grafana", "monitoring"), ("payments-db", "payments"),
], 1.1)
# (name, answers as (type, count), cname chain length)
_POPULAR = zipf([
    ("api.stripe.com.", 2, 0), ("sqs.eu-west-1.amazonaws.com.", 8, 0), ("s3.eu-west-1.amazonaws.com.", 8, 1),
    ("sts.eu-west-1.amazonaws.com.", 3, 0), ("registry-1.docker.io.", 4, 0), ("www.google.com.", 1, 0),
    ("api.github.com.", 1, 0), ("o450917.ingest.sentry.io.", 1, 0), ("hooks.slack.com.", 4, 0),
    ("pypi.org.", 4, 0), ("files.pythonhosted.org.", 4, 1), ("login.microsoftonline.com.", 4, 3),
    ("api.sendgrid.com.", 3, 0), ("dynamodb.eu-west-1.amazonaws.com.", 8, 0), ("fcm.googleapis.com.", 1, 0),
    ("api.segment.io.", 4, 1), ("browser-intake-datadoghq.eu.", 4, 0), ("auth.docker.io.", 4, 0),
    ("production.cloudflare.docker.com.", 2, 0), ("ghcr.io.", 1, 0), ("pkg-containers.githubusercontent.com.", 4, 0),
    ("ecr.eu-west-1.amazonaws.com.", 2, 0), ("api.twilio.com.", 4, 1), ("www.googleapis.com.", 1, 0),
    ("oauth2.googleapis.com.", 1, 0), ("api.openai.com.", 2, 0), ("cdn.jsdelivr.net.", 2, 2),
    ("graph.facebook.com.", 1, 1), ("apple.com.", 3, 0), ("ntp.ubuntu.com.", 4, 0),
    ("security.ubuntu.com.", 6, 0), ("archive.ubuntu.com.", 6, 0), ("amazonlinux-2-repos-eu-west-1.s3.dualstack.eu-west-1.amazonaws.com.", 4, 1),
], 1.0)
_TAIL_ZONES = zipf(["cloudfront.net.", "elb.eu-west-1.amazonaws.com.", "eu-west-1.compute.internal.",
                    "s3.amazonaws.com.", "execute-api.eu-west-1.amazonaws.com.", "cdn.cloudflare.net.",
                    "azureedge.net.", "akamaiedge.net.", "fastly.net.", "ingest.sentry.io."], 0.9)
_OTHER_TYPES = weighted([("HTTPS", 35), ("SRV", 20), ("TXT", 12), ("MX", 6), ("CNAME", 6), ("NS", 3), ("PTR", 18)])
_SUFFIXES = ("svc.cluster.local.", "cluster.local.", "eu-west-1.compute.internal.")
_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def _pod_clients(pool: random.Random) -> Distribution[tuple[str, bytes]]:
    """The resolvers' clients, (IP, IP as the key): 1,800 pods and the nodes, Zipf-skewed."""
    pods: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    while len(pods) < 1800:
        ip = f"10.244.{pool.randrange(0, 24)}.{pool.randrange(2, 255)}"
        if ip not in seen:
            seen.add(ip)
            pods.append((ip, ip.encode()))
    pods += [(f"10.0.4.{n}", f"10.0.4.{n}".encode()) for n in range(11, 19)]  # node-level resolvers
    pool.shuffle(pods)
    return zipf(pods, 1.0)


class _Questions:
    """The kinds of question a cluster asks, one method each, drawing with the values' stream."""

    __slots__ = ("_rnd",)

    def __init__(self, rnd: Callable[[], float]) -> None:
        self._rnd = rnd

    def _a_or_aaaa(self) -> str:
        return "A" if self._rnd() < 0.6 else "AAAA"

    def internal(self) -> DnsAnswer:
        rnd = self._rnd
        svc, ns = _SERVICES.pick(rnd)
        qt = self._a_or_aaaa()
        name = f"{svc}.{ns}.svc.cluster.local."
        if qt == "A":
            return DnsAnswer(name, qt, "NOERROR", "qr,aa,rd", _RR_BYTES["A"] * (1 if rnd() < 0.9 else 3), False)
        return DnsAnswer(name, qt, "NOERROR", "qr,aa,rd", _SOA_BYTES + 54, False)

    def search_path(self) -> DnsAnswer:
        rnd = self._rnd
        # ndots:5 makes resolvers try the search list first: a burst of NXDOMAIN per external name.
        ext = _POPULAR.pick(rnd)[0] if rnd() < 0.8 else f"{_SERVICES.pick(rnd)[0]}."
        r = rnd()
        suffix = f"{_NAMESPACES[int(rnd() * len(_NAMESPACES))]}.svc.cluster.local." if r < 0.4 else _SUFFIXES[int(rnd() * 3)]
        upstream = suffix.endswith("internal.")
        return DnsAnswer(f"{ext}{suffix}", self._a_or_aaaa(), "NXDOMAIN", "qr,rd,ra" if upstream else "qr,aa,rd",
                         _SOA_BYTES + (20 if upstream else 54), upstream)

    def external(self) -> DnsAnswer:
        rnd = self._rnd
        name, n, cnames = _POPULAR.pick(rnd)
        qt = self._a_or_aaaa()
        if rnd() < 0.004:
            return DnsAnswer(name, qt, "SERVFAIL", "qr,rd", 0, True)
        n = n if qt == "A" else max(1, n // 2)
        return DnsAnswer(name, qt, "NOERROR", "qr,rd,ra", cnames * _RR_BYTES["CNAME"] + n * _RR_BYTES[qt], rnd() < 0.15)

    def long_tail(self) -> DnsAnswer:
        rnd = self._rnd
        zone = _TAIL_ZONES.pick(rnd)
        if zone.startswith("eu-west-1.compute"):
            label = f"ip-10-0-{int(rnd() * 64)}-{int(rnd() * 255)}"
        elif zone.startswith("ingest"):
            label = f"o{int(100_000 + rnd() * 900_000)}"
        else:
            label = "".join(_ALNUM[int(rnd() * 36)] for _ in range(8 + int(rnd() * 10)))
        qt = self._a_or_aaaa()
        if rnd() < 0.08:
            return DnsAnswer(f"{label}.{zone}", qt, "NXDOMAIN", "qr,rd,ra", _SOA_BYTES, True)
        n = 1 + int(rnd() * 4)
        return DnsAnswer(f"{label}.{zone}", qt, "NOERROR", "qr,rd,ra", n * _RR_BYTES[qt], rnd() < 0.7)

    def dga(self) -> DnsAnswer:
        rnd = self._rnd
        label = "".join(_ALNUM[int(rnd() * 26)] for _ in range(10 + int(rnd() * 8)))
        tld = ("com.", "net.", "org.", "info.", "xyz.", "top.")[int(rnd() * rnd() * 6)]
        return DnsAnswer(f"{label}.{tld}", "A", "NXDOMAIN", "qr,rd,ra", _SOA_BYTES - 20, True)

    def other(self) -> DnsAnswer:
        rnd = self._rnd
        qt = _OTHER_TYPES.pick(rnd)
        if qt == "PTR":
            name = f"{int(rnd() * 255)}.{int(rnd() * 24)}.244.10.in-addr.arpa."
            if rnd() < 0.7:
                return DnsAnswer(name, qt, "NOERROR", "qr,aa,rd", _RR_BYTES["PTR"], False)
            return DnsAnswer(name, qt, "NXDOMAIN", "qr,aa,rd", _SOA_BYTES, False)
        if qt == "SRV":
            svc, ns = _SERVICES.pick(rnd)
            return DnsAnswer(f"_grpclb._tcp.{svc}.{ns}.svc.cluster.local.", qt, "NXDOMAIN", "qr,aa,rd", _SOA_BYTES, False)
        name = _POPULAR.pick(rnd)[0]
        if qt == "TXT":
            name = f"_dmarc.{name}" if rnd() < 0.5 else name
        return DnsAnswer(name, qt, "NOERROR", "qr,rd,ra", _RR_BYTES[qt] * (1 + int(rnd() * 3)), rnd() < 0.5)


def _question_mix(q: _Questions) -> Distribution[Callable[[], DnsAnswer]]:
    """The kinds of question with their shares of the traffic."""
    return weighted([(q.internal, 30), (q.search_path, 24), (q.external, 30), (q.long_tail, 11), (q.dga, 0.6),
                     (q.other, 4.4)])


def generate_dns(ctx: StreamContext) -> Iterator[Record]:
    """Query log lines of two CoreDNS replicas."""
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    clients = _pod_clients(pool)
    categories = _question_mix(_Questions(rnd))
    # Two CoreDNS replicas log to the same topic.  Named whether or not headers are on, so that
    # the pool stream, and with it every value, is the same either way.
    replicas = [f"coredns-5d78c9869d-{pod_suffix(pool)}" for _ in range(2)]
    pick_headers = hdr.picker(replicas) if hdr is not None else None
    normal = normal_table(pool)
    exp = math.exp
    now_text = PerSecondText(iso_time)

    while True:
        times = clock.block()
        for t, (ip, ip_b), category in zip(times, clients.block(rng), categories.block(rng), strict=False):
            ms = int(t)
            a = category()
            edns = rnd()
            if edns < 0.8:
                do, bufsize, opt = "false", 512, 0
            else:
                do, bufsize, opt = ("true" if edns > 0.97 else "false"), 1232, 11
            proto = "tcp" if rnd() < 0.015 else "udp"
            req = 12 + len(a.name) + 1 + 4 + opt
            resp = req + a.answer_bytes if a.rcode != "SERVFAIL" else req
            z = normal[int(rnd() * TABLE_SIZE)]
            if a.rcode == "SERVFAIL":
                dur_ns = int(2_000_000_000 + 3_000_000_000 * rnd())
            elif a.upstream:
                dur_ns = int(4_000_000 * exp(0.9 * z))
            else:
                dur_ns = int(90_000 * exp(0.6 * z))
            dur = f"{dur_ns // 1_000_000_000}.{dur_ns % 1_000_000_000:09d}".rstrip("0")
            value = (f'{now_text(ms // 1000)}.{ms % 1000:03d}Z [INFO] {ip}:{32_768 + int(rnd() * 28_000)} - '
                     f'{int(rnd() * 65_536)} "{a.qtype} IN {a.name} {proto} {req} {do} {bufsize}" {a.rcode} '
                     f"{a.flags} {resp} {dur}s").encode()
            yield Record(ip_b if keyed else None, value, pick_headers() if pick_headers is not None else (), ms)

