"""What a copier asks of the broker: its requests by type, counted from the broker's request log.

A local broker started with `request_log=True` logs every completed request (kafka.request.logger at
debug), one line each: `Completed request:{json}` with the request header (API name, client id) and
the broker's times in ms (localTimeMs: the request handler thread's time on it, the part that is the
broker's own work; totalTimeMs: receipt to response sent, waits included). The bench notes the log's
size before and after a copy and counts the lines in between, by API, for the copier's clients only
(every client but the bench's own, whose client.id is BENCH_CLIENT_ID).

Pure: parsing and summing; reading the log's byte range is the caller's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: The client.id of the bench's own clients (progress polls, topic sizes): their requests are not the copier's.
BENCH_CLIENT_ID = "bench"

_MARK = "Completed request:"


@dataclass(frozen=True)
class ApiLoad:
    """One request type's requests from the copier's clients over one copy."""

    api: str
    requests: int
    local_ms: float  # the broker's handler time on them
    total_ms: float  # receipt to response, waits (fetch.wait.max.ms, throttling) included


def parse(lines: Iterable[str], *, exclude_client_prefix: str = BENCH_CLIENT_ID) -> dict[str, ApiLoad]:
    """Requests by API name from request-log lines; lines of other loggers, and requests of clients whose
    client.id starts with `exclude_client_prefix`, are skipped."""
    counts: dict[str, list[float]] = {}
    for line in lines:
        at = line.find(_MARK)
        if at < 0:
            continue
        try:
            desc = json.loads(line[at + len(_MARK):])
        except ValueError:
            continue  # a line cut by the byte range's end
        header = desc.get("requestHeader") or {}
        if str(header.get("clientId", "")).startswith(exclude_client_prefix):
            continue
        api = str(header.get("requestApiKeyName", header.get("requestApiKey", "?")))
        c = counts.setdefault(api, [0, 0.0, 0.0])
        c[0] += 1
        c[1] += float(desc.get("localTimeMs", 0.0))
        c[2] += float(desc.get("totalTimeMs", 0.0))
    return {api: ApiLoad(api, int(n), local, total) for api, (n, local, total) in counts.items()}


def read_range(log: Path, start: int, end: int) -> list[str]:
    """The log's lines between byte offsets `start` and `end` (sizes noted before and after a copy)."""
    with log.open("rb") as f:
        f.seek(start)
        data = f.read(max(0, end - start))
    return data.decode("utf-8", errors="replace").splitlines()


def per_million(loads: dict[str, ApiLoad], records: int) -> dict[str, ApiLoad]:
    """The same loads scaled to 1M records copied."""
    k = 1e6 / records if records else 0.0
    return {a: ApiLoad(a, round(x.requests * k), x.local_ms * k, x.total_ms * k) for a, x in loads.items()}
