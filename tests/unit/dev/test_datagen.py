"""Built-in record generators: deterministic, well-formed, skewed like production data."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from itertools import islice, pairwise

import pytest

from transcoder.dev.datagen import KINDS, Record, generate

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

NGINX_RE = re.compile(
    r'^(?P<ip>[0-9a-f.:]+) - (?P<user>\S+) \[(?P<time>[^\]]+)\] "(?P<method>[A-Z]+) (?P<path>/\S*) '
    r'(?P<proto>HTTP/[0-9.]+)" '
    r'(?P<status>\d{3}) (?P<size>\d+) "(?P<referer>[^"]*)" "(?P<ua>[^"]*)"(?: (?P<rt>\d+\.\d{3}))?$'
)
DNS_RE = re.compile(
    r'^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) \[INFO\] (?P<ip>[0-9.]+):(?P<port>\d+) - (?P<id>\d+) '
    r'"(?P<type>A|AAAA|CNAME|MX|TXT|PTR|SRV|HTTPS|NS) IN (?P<name>[A-Za-z0-9._-]+\.) (?P<proto>udp|tcp) (?P<req>\d+) '
    r'(?P<do>true|false) (?P<bufsize>\d+)" (?P<rcode>NOERROR|NXDOMAIN|SERVFAIL|REFUSED) (?P<flags>[a-z,]+) '
    r"(?P<resp>\d+) (?P<dur>\d+\.\d+)s$"
)
LINE_PROTOCOL_RE = re.compile(
    r"^(?P<measurement>[a-z_]+)(?P<tags>(?:,[a-z_]+=[^,= ]+)+) "
    r"(?P<fields>[a-z0-9_]+=(?:-?\d+(?:\.\d+)?i?)(?:,[a-z0-9_]+=(?:-?\d+(?:\.\d+)?i?))*) (?P<ts>\d+)$"
)


def take(kind: str, n: int, **kwargs) -> list[Record]:
    return list(islice(generate(kind, **kwargs), n))


def utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms // 1000, tz=UTC)


@pytest.fixture(scope="module")
def samples() -> dict[str, list[Record]]:
    """2000 records of every kind with the default parameters (seed 0, keys on, headers off)."""
    return {kind: take(kind, 2000) for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_records_other_seed_other_records(kind, samples):
    assert take(kind, 2000) == samples[kind]
    assert take(kind, 2000, seed=1) != samples[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_timestamps_are_monotone_from_start_with_the_asked_rate(kind):
    eps = 500.0
    recs = take(kind, 4000, start_ms=START_MS + 12_345, events_per_second=eps)
    ts = [r.timestamp_ms for r in recs]
    assert ts[0] >= START_MS + 12_345
    assert all(a <= b for a, b in pairwise(ts))
    mean_gap = (ts[-1] - ts[0]) / (len(ts) - 1)
    assert 0.5 * (1000 / eps) < mean_gap < 2.0 * (1000 / eps)
    assert all(isinstance(t, int) for t in ts)


@pytest.mark.parametrize("kind", KINDS)
def test_keys_and_headers_flags_change_neither_values_nor_timestamps(kind, samples):
    plain = [(r.value, r.timestamp_ms) for r in samples[kind]]
    other = take(kind, 2000, keys=False, headers=True)
    assert [(r.value, r.timestamp_ms) for r in other] == plain


def test_nginx_lines_are_combined_format_with_the_record_time(samples):
    for r in samples["nginx"]:
        m = NGINX_RE.match(r.value.decode())
        assert m, r.value
        d = utc(r.timestamp_ms)
        assert m["time"] == f"{d.day:02d}/{MONTHS[d.month - 1]}/{d.year}:{d:%H:%M:%S} +0000"
        assert r.key == m["ip"].encode()


def test_nginx_client_ips_are_skewed():
    recs = take("nginx", 20_000, seed=3)
    ips = Counter(r.key for r in recs)
    top_count = ips.most_common(1)[0][1]
    # Even if every distinct IP seen were the whole pool, the top one is far above a uniform share.
    assert top_count > 5 * len(recs) / len(ips)
    assert len(ips) < 20_000 / 4


def test_nginx_values_have_realistic_sizes_and_mix():
    recs = take("nginx", 20_000, seed=5)
    sizes = [len(r.value) for r in recs]
    assert 150 <= sum(sizes) / len(sizes) <= 350
    matches = [NGINX_RE.match(r.value.decode()) for r in recs]
    statuses = Counter(m["status"] for m in matches)
    assert statuses["200"] / len(recs) > 0.6
    for rare in ("304", "404", "301", "500"):
        assert 0 < statuses[rare] < statuses["200"] / 5
    assert Counter(m["method"] for m in matches).most_common(1)[0][0] == "GET"
    assert 0.15 < sum(m["referer"] == "-" for m in matches) / len(recs) < 0.8
    assert 20 <= len({m["ua"] for m in matches}) <= 80


def test_nginx_error_lines(samples):
    line = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(warn|error|crit|notice|alert)\] (\d+)#\3: "
                      r"(?:\*(\d+) )?(.+)$")
    levels = Counter()
    conns: dict[str, list[int]] = {}
    for r in samples["nginx-error"]:
        m = line.match(r.value.decode())
        assert m, r.value
        assert m[1] == utc(r.timestamp_ms).strftime("%Y/%m/%d %H:%M:%S")
        levels[m[2]] += 1
        if m[4]:
            conns.setdefault(m[3], []).append(int(m[4]))
            server = re.search(r", server: ([^,]+)", m[5])
            assert server and r.key == server[1].encode()
    assert levels.most_common(1)[0][0] == "error"
    assert {"warn", "crit"} <= set(levels)
    for seq in conns.values():  # connection numbers only grow, per worker process
        assert seq == sorted(seq)


def test_json_logs_are_journald_entries(samples):
    always = ("__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID", "_MACHINE_ID", "_HOSTNAME",
              "PRIORITY", "SYSLOG_IDENTIFIER", "MESSAGE")
    machine_ids: dict[str, set[str]] = {}
    units = set()
    for r in samples["json-logs"]:
        doc = json.loads(r.value)
        assert all(isinstance(doc[f], str) for f in always), doc
        assert int(doc["__REALTIME_TIMESTAMP"]) // 1000 == r.timestamp_ms
        assert doc["PRIORITY"] in "01234567"
        assert r.key == doc["_HOSTNAME"].encode()
        if doc.get("_TRANSPORT") != "kernel":  # kernel messages have no unit and no pid, as in journald
            assert doc["_PID"].isdigit() and doc["_SYSTEMD_UNIT"]
            units.add(doc["_SYSTEMD_UNIT"])
        machine_ids.setdefault(doc["_HOSTNAME"], set()).add(doc["_MACHINE_ID"])
    assert all(len(ids) == 1 for ids in machine_ids.values())
    assert len(machine_ids) > 10 and len(units) > 5


def test_dns_lines(samples):
    rcodes = Counter()
    types = Counter()
    for r in samples["dns"]:
        m = DNS_RE.match(r.value.decode())
        assert m, r.value
        d = utc(r.timestamp_ms)
        assert m["time"] == f"{d:%Y-%m-%dT%H:%M:%S}.{r.timestamp_ms % 1000:03d}Z"
        assert r.key == m["ip"].encode()
        assert int(m["resp"]) >= int(m["req"])
        rcodes[m["rcode"]] += 1
        types[m["type"]] += 1
    assert rcodes.most_common(1)[0][0] == "NOERROR" and rcodes["NXDOMAIN"] > 0
    assert (types["A"] + types["AAAA"]) / sum(types.values()) > 0.8


def test_metrics_are_line_protocol_with_the_record_time_in_ns(samples):
    series: dict[str, list[dict[str, float]]] = {}
    for r in samples["metrics"]:
        m = LINE_PROTOCOL_RE.match(r.value.decode())
        assert m, r.value
        assert int(m["ts"]) == r.timestamp_ms * 1_000_000
        tags = dict(kv.split("=") for kv in m["tags"][1:].split(","))
        assert list(tags) == sorted(tags)
        assert r.key == tags["host"].encode()
        fields = {k: float(v.rstrip("i")) for k, v in (kv.split("=") for kv in m["fields"].split(","))}
        series.setdefault(m["measurement"] + m["tags"], []).append(fields)
    assert {"cpu", "mem", "disk", "net", "system"} <= {k.split(",")[0] for k in series}
    # Random walks: consecutive CPU readings of a series stay close.
    steps = [abs(b["usage_user"] - a["usage_user"])
             for k, vals in series.items() if k.startswith("cpu,") for a, b in pairwise(vals)]
    assert steps and sum(steps) / len(steps) < 5.0


def test_entities_are_versioned_upserts_and_tombstones():
    recs = take("entities", 20_000, seed=2, keys=False)
    assert all(r.key for r in recs)  # keyed even with keys=False: compacted topics need keys
    tombstones = sum(r.value is None for r in recs)
    assert 0.01 < tombstones / len(recs) < 0.10
    version: dict[bytes, int] = {}
    for r in recs:
        if r.value is None:
            assert r.key in version, "tombstone for an entity never written"
            del version[r.key]
            continue
        doc = json.loads(r.value)
        assert doc["id"].encode() == r.key
        assert {"name", "email", "country", "plan", "created_at", "updated_at", "balance", "status", "tags"} <= set(doc)
        expected = version.get(r.key, 0) + 1
        assert doc["version"] == expected
        version[r.key] = doc["version"]
        d = utc(r.timestamp_ms)
        assert doc["updated_at"] == f"{d:%Y-%m-%dT%H:%M:%S}.{r.timestamp_ms % 1000:03d}Z"
    assert max(Counter(r.key for r in recs).values()) > 50  # a few entities are updated very often


def test_entities_can_be_recreated_after_a_tombstone():
    deleted: set[bytes] = set()
    for r in take("entities", 20_000, seed=2):
        if r.value is None:
            deleted.add(r.key)
        elif r.key in deleted:
            assert json.loads(r.value)["version"] == 1
            return
    pytest.fail("no deleted entity came back")


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "entities"])
def test_keys_off_means_no_keys(kind):
    assert all(r.key is None for r in take(kind, 500, keys=False))


@pytest.mark.parametrize("kind", KINDS)
def test_headers(kind, samples):
    assert all(r.headers == () for r in samples[kind])
    recs = take(kind, 2000, headers=True)
    for r in recs:
        names = [n for n, _ in r.headers]
        assert names[names[0] == "content-type":][0] == "source"
        assert all(isinstance(n, str) and isinstance(v, bytes) for n, v in r.headers)
        if kind in ("json-logs", "entities"):
            assert re.fullmatch(rb"[0-9a-f]{32}", dict(r.headers)["trace-id"])
    assert any(r.headers[i][0] == r.headers[i + 1][0] == "tag" for r in recs for i in range(len(r.headers) - 1))
    assert any(("content-type", b"application/json" if kind in ("json-logs", "entities") else b"text/plain")
               in r.headers for r in recs)


def test_unknown_kind_names_the_valid_ones():
    with pytest.raises(ValueError) as exc:
        generate("apache")  # raised on the call, not on the first next()
    for kind in KINDS:
        assert kind in str(exc.value)


@pytest.mark.parametrize("bad", [{"events_per_second": 0}, {"events_per_second": float("nan")}, {"start_ms": -1}])
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        generate("nginx", **bad)


def test_streams_are_endless_and_independent():
    a, b = generate("dns", seed=9), generate("dns", seed=9)
    first = next(a)
    assert next(b) == first
    assert sum(1 for _ in islice(a, 50_000)) == 50_000
