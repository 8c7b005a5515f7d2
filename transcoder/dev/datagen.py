"""Built-in, deterministic generators of realistic log/event records for `transcoder seed`.

Compression ratios depend entirely on the data, so the generators aim at the statistical
shape of production traffic rather than at variety: values repeat with skewed (Zipf-like)
frequencies, timestamps only move forward, sizes follow log-normal tails, metrics drift
smoothly, and entity documents change a few fields per update.

Every generator is a pure function of its parameters: the same `seed` gives byte-identical
records on every run and platform.  Nothing reads the clock, the module-level `random`
state, `hash()` of strings or set ordering.  Independent `random.Random` streams (seeded from
strings, which CPython hashes with SHA-512, not with `hash()`) drive the pools, the values,
the arrival times and the headers, so turning keys or headers on or off never changes the
values or timestamps of a stream.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import random
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Generic, NamedTuple, TypeVar

__all__ = ["KINDS", "Record", "generate"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record, as a producer would send it."""

    key: bytes | None
    value: bytes | None  # None = tombstone
    headers: tuple[tuple[str, bytes], ...]  # () when headers are off; order matters, duplicates allowed
    timestamp_ms: int  # epoch milliseconds


KINDS: tuple[str, ...] = ("nginx", "nginx-error", "json-logs", "dns", "metrics", "entities")


def generate(kind: str, *, seed: int = 0, keys: bool = True, headers: bool = False,
             start_ms: int = 1_767_225_600_000, events_per_second: float = 2000.0) -> Iterator[Record]:
    """Endless, deterministic stream of records of `kind`. Raise ValueError naming the valid kinds for an unknown kind.

    Records arrive as a Poisson process: timestamps start at `start_ms` and advance by
    exponentially distributed gaps averaging 1000/`events_per_second` ms; every time written
    inside a value is derived from its record's timestamp.

    `keys=True` keys each record as its producer would: nginx and dns by client IP,
    nginx-error by server (vhost) name, json-logs and metrics by host name.  `entities`
    records are ALWAYS keyed by entity id, whatever `keys` says, because they are meant for
    compacted topics, where an unkeyed record is rejected and tombstones are meaningless.

    `headers=True` adds content-type and source headers (plus trace-id for json-logs and
    entities); about 2% of records also carry two "tag" headers in a row, so that copies are
    seen to keep duplicate header names and their order.
    """
    factory = _GENERATORS.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise ValueError(f"unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, not {seed!r}")
    if isinstance(start_ms, bool) or not isinstance(start_ms, int) or start_ms < 0:
        raise ValueError(f"start_ms must be a non-negative int (epoch milliseconds), not {start_ms!r}")
    if (isinstance(events_per_second, bool) or not isinstance(events_per_second, (int, float))
            or not math.isfinite(events_per_second) or events_per_second <= 0):
        raise ValueError(f"events_per_second must be a positive finite number, not {events_per_second!r}")

    def stream(purpose: str) -> random.Random:
        return random.Random(f"transcoder.datagen/{kind}/{seed}/{purpose}")

    ctx = _Ctx(
        pool=stream("pools"),
        rng=stream("values"),
        clock=_Clock(stream("clock"), start_ms, float(events_per_second)),
        keys=bool(keys),
        headers=_Headers(stream("headers"), kind) if headers else None,
    )
    return factory(ctx)


# --------------------------------------------------------------------------------------------
# Shared helpers

# Values are drawn in blocks so the per-record loops mostly index into ready lists.
_BLOCK = 1024
_DUP_TAG_SHARE = 0.02
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Fixed English names: strftime("%b") would follow the process locale.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# Slots in the lookup tables that replace gauss() and small weighted draws in hot loops.
_TABLE_SIZE = 4096


class _Dist(Generic[_T]):
    """A weighted categorical distribution with its cumulative weights computed once."""

    __slots__ = ("items", "cum", "total", "hi")

    def __init__(self, items: Sequence[_T], weights: Sequence[float]) -> None:
        if not items or len(items) != len(weights):
            raise ValueError("a distribution needs one weight per item, and at least one item")
        self.items: list[_T] = list(items)
        self.cum: list[float] = list(itertools.accumulate(weights))
        self.total: float = self.cum[-1]
        self.hi: int = len(self.cum) - 1

    def pick(self, rnd: Callable[[], float]) -> _T:
        # hi bound: random() * total can round up to total itself.
        return self.items[bisect_right(self.cum, rnd() * self.total, 0, self.hi)]

    def block(self, rng: random.Random, k: int = _BLOCK) -> list[_T]:
        return rng.choices(self.items, cum_weights=self.cum, k=k)


def _table(dist: _Dist[_T], size: int = _TABLE_SIZE) -> list[_T]:
    """`dist` as a lookup table of `size` slots: picking is one index, no search.

    Every item keeps at least one slot, so shares are rounded to 1/size; the hot loops use this
    for small distributions whose weights are far coarser than that anyway.
    """
    weights = [b - a for a, b in zip([0.0] + dist.cum[:-1], dist.cum)]
    exact = [w * size / dist.total for w in weights]
    counts = [max(1, int(e)) if w > 0 else 0 for e, w in zip(exact, weights)]
    # Largest remainders fill the slots left over; ties go to the earlier item.
    by_remainder = sorted(range(len(counts)), key=lambda i: (int(exact[i]) - exact[i], i))
    short = size - sum(counts)
    for i in itertools.islice(itertools.cycle(by_remainder), max(0, short)):
        counts[i] += 1
    while sum(counts) > size:
        counts[max(range(len(counts)), key=lambda i: (counts[i], -i))] -= 1
    return [item for item, c in zip(dist.items, counts) for _ in range(c)]


def _zipf_weights(n: int, s: float = 1.0) -> list[float]:
    return [1.0 / (rank ** s) for rank in range(1, n + 1)]


def _zipf(items: Sequence[_T], s: float = 1.0) -> _Dist[_T]:
    """Rank-frequency skew: the first item is the most popular, the tail is long and thin."""
    return _Dist(items, _zipf_weights(len(items), s))


def _weighted(pairs: Sequence[tuple[_T, float]]) -> _Dist[_T]:
    return _Dist([p[0] for p in pairs], [p[1] for p in pairs])


def _skewed_int(rnd: Callable[[], float], n: int) -> int:
    """An int in [1, n) with density ~1/x: a few small ids are hot, a long tail is cold."""
    return int(n ** rnd())


def _normal_table(rng: random.Random) -> list[float]:
    # Indexing a table is several times cheaper than gauss() in the hot loops.
    return [rng.gauss(0.0, 1.0) for _ in range(_TABLE_SIZE)]


def _hex(rng: random.Random, digits: int) -> str:
    return format(rng.getrandbits(digits * 4), f"0{digits}x")


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _pod_suffix(rng: random.Random) -> str:
    # Kubernetes' name-suffix alphabet: no vowels, no look-alike digits.
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(rng.choice(alphabet) for _ in range(5))


def _public_ipv4(rng: random.Random) -> str:
    # First octets of busy public allocations; private, loopback and multicast ranges left out.
    first = rng.choice((
        2, 5, 23, 24, 31, 37, 41, 45, 46, 47, 49, 50, 58, 62, 66, 67, 68, 69, 71, 73, 74, 76, 77, 78,
        79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 98, 99, 101, 103, 104, 107,
        108, 109, 110, 112, 114, 116, 117, 118, 121, 124, 125, 136, 141, 142, 146, 151, 152, 154, 157,
        162, 167, 173, 174, 176, 178, 180, 181, 185, 186, 187, 188, 189, 190, 191, 193, 194, 195, 197,
        200, 201, 202, 212, 213, 216, 217, 220, 223,
    ))
    return f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def _public_ipv6(rng: random.Random) -> str:
    prefix = rng.choice(("2a02:", "2a01:", "2001:", "2600:", "2607:", "2a00:", "2409:", "2804:"))
    groups = ":".join(format(rng.getrandbits(16), "x") for _ in range(3))
    tail = ":".join(format(rng.getrandbits(16), "x") for _ in range(rng.choice((1, 2, 4))))
    return f"{prefix}{format(rng.getrandbits(16), 'x')}:{groups}" + (f"::{tail}" if rng.random() < 0.5 else f":{tail}")


def _utc(sec: int) -> datetime:
    return _EPOCH + timedelta(seconds=sec)


def _fmt_access(sec: int) -> str:
    d = _utc(sec)
    return f"{d.day:02d}/{_MONTHS[d.month - 1]}/{d.year:04d}:{d.hour:02d}:{d.minute:02d}:{d.second:02d} +0000"


def _fmt_slashed(sec: int) -> str:
    d = _utc(sec)
    return f"{d.year:04d}/{d.month:02d}/{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def _fmt_iso(sec: int) -> str:
    d = _utc(sec)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def _fmt_spaced(sec: int) -> str:
    d = _utc(sec)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def _fmt_klog(sec: int) -> str:
    d = _utc(sec)
    return f"{d.month:02d}{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"


class _SecondText:
    """A per-second time text, re-rendered only when the second changes (most records share it)."""

    __slots__ = ("_fmt", "_sec", "_text")

    def __init__(self, fmt: Callable[[int], str]) -> None:
        self._fmt = fmt
        self._sec = -1 << 62
        self._text = ""

    def __call__(self, sec: int) -> str:
        if sec != self._sec:
            self._sec = sec
            self._text = self._fmt(sec)
        return self._text


def _micros(t: float, ms: int) -> int:
    """Epoch microseconds of fractional-ms time `t`, never leaving the millisecond `ms`."""
    return ms * 1000 + min(999, int((t - ms) * 1000.0))


class _Clock:
    """Poisson arrivals: exponential gaps with fractional milliseconds kept between records."""

    __slots__ = ("_rng", "_t", "_neg_mean")

    def __init__(self, rng: random.Random, start_ms: int, events_per_second: float) -> None:
        self._rng = rng
        self._t = float(start_ms)
        self._neg_mean = -1000.0 / events_per_second

    @property
    def now(self) -> float:
        """The next arrival time (fractional ms), without drawing anything."""
        return self._t

    def block(self, k: int = _BLOCK) -> list[float]:
        """The next `k` arrival times; the first record of a stream arrives at start_ms exactly."""
        rnd = self._rng.random
        log = math.log
        m = self._neg_mean
        # 1 - random() is in (0, 1], so the log is finite and the gap non-negative.
        times = list(itertools.accumulate([m * log(1.0 - rnd()) for _ in range(k)], initial=self._t))
        self._t = times.pop()
        return times


class _Headers:
    """Builds header tuples; its own random stream, so headers never shift the values' stream."""

    __slots__ = ("_rnd", "_bits", "_content_type", "_tags", "_base")

    def __init__(self, rng: random.Random, kind: str) -> None:
        self._rnd = rng.random
        self._bits = rng.getrandbits
        self._content_type = b"application/json" if kind in ("json-logs", "entities") else b"text/plain"
        self._tags = (("tag", b"env=prod"), ("tag", f"kind={kind}".encode()))
        self._base: dict[tuple[str, bool], tuple[tuple[str, bytes], ...]] = {}

    def _plain(self, source: str, content: bool) -> tuple[tuple[str, bytes], ...]:
        base = self._base.get((source, content))
        if base is None:
            src = (("source", source.encode()),)
            base = ((("content-type", self._content_type),) + src) if content else src
            self._base[(source, content)] = base
        return base

    def picker(self, sources: Sequence[str]) -> Callable[[], tuple[tuple[str, bytes], ...]]:
        """Headers of a record from one of `sources`, picked uniformly: the fast path for hot loops."""
        variants = [(self._plain(s, True), self._plain(s, True) + self._tags) for s in sources]
        n = float(len(variants))
        rnd = self._rnd

        def pick() -> tuple[tuple[str, bytes], ...]:
            plain, tagged = variants[int(rnd() * n)]
            return tagged if rnd() < _DUP_TAG_SHARE else plain
        return pick

    def choose(self, sources: Sequence[str]) -> str:
        """One of `sources`, uniformly, for a value that does not say where it came from."""
        return sources[int(self._rnd() * len(sources))]

    def make(self, source: str, *, trace: bool = False, content: bool = True) -> tuple[tuple[str, bytes], ...]:
        base = self._plain(source, content)
        if trace:
            base = base + (("trace-id", b"%032x" % self._bits(128)),)
        if self._rnd() < _DUP_TAG_SHARE:
            base = base + self._tags
        return base


@dataclass(slots=True)
class _Ctx:
    pool: random.Random  # one-off construction of pools and per-series parameters
    rng: random.Random  # per-record values
    clock: _Clock
    keys: bool
    headers: _Headers | None


# --------------------------------------------------------------------------------------------
# nginx: access log, "combined" format with $request_time appended

_SITE = "www.example-shop.com"
_ORIGIN = f"https://{_SITE}"

# (user agent, weight, class): "browser" clients speak HTTP/2 and send referers; "app", "tool"
# and "bot" clients mostly speak HTTP/1.1 and send none.
_USER_AGENTS: tuple[tuple[str, float, str], ...] = (
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", 20, "browser"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1.1 Mobile/15E148 Safari/604.1", 12, "browser"),
    ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", 10, "browser"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", 9, "browser"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36", 8, "browser"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", 5, "browser"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1.1 Safari/605.1.15", 5, "browser"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_6_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1", 4, "browser"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", 4, "browser"),
    ("okhttp/4.12.0", 3, "app"),
    ("ExampleShop/5.12.0 (iPhone; iOS 18.1.1; Scale/3.00)", 3, "app"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36", 2, "browser"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", 2, "browser"),
    ("ExampleShop/5120 CFNetwork/1568.200.51 Darwin/24.1.0", 2, "app"),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", 2, "bot"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0", 1.5, "browser"),
    ("Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36", 1.5, "browser"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", 1.5, "browser"),
    ("Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", 1.5, "bot"),
    ("curl/8.5.0", 1.5, "tool"),
    ("Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", 1.2, "browser"),
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36", 1.2, "bot"),
    ("python-requests/2.32.3", 1.2, "tool"),
    ("Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", 1.0, "browser"),
    ("Go-http-client/1.1", 1.0, "tool"),
    ("curl/7.81.0", 0.8, "tool"),
    ("Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", 0.8, "bot"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0", 0.6, "browser"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 357.0.0.25.101 (iPhone14,5; iOS 17_6; en_US; en; scale=3.00; 1170x2532; 658335220)", 0.6, "browser"),
    ("Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0", 0.5, "browser"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8 Build/AP2A.240905.003; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/130.0.6723.107 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/487.0.0.56.109;]", 0.5, "browser"),
    ("Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)", 0.5, "bot"),
    ("axios/1.7.7", 0.5, "tool"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/128.0.0.0 YaBrowser/24.10.0.0 Safari/537.36", 0.4, "browser"),
    ("Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", 0.4, "bot"),
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot", 0.4, "bot"),
    ("Go-http-client/2.0", 0.4, "tool"),
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)", 0.3, "bot"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", 0.3, "bot"),
    ("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", 0.3, "bot"),
    ("PostmanRuntime/7.42.0", 0.3, "tool"),
    ("Apache-HttpClient/4.5.14 (Java/17.0.12)", 0.3, "tool"),
    ("Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", 0.3, "bot"),
    ("Wget/1.21.4", 0.2, "tool"),
    ("node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", 0.2, "tool"),
    ("Mozilla/5.0 zgrab/0.x", 0.2, "bot"),
    ("Datadog Agent/7.59.0", 0.2, "tool"),
    ("-", 0.2, "tool"),
    ("Mozilla/5.0 (compatible; CensysInspect/1.1; +https://about.censys.io/)", 0.15, "bot"),
    ("Twitterbot/1.0", 0.1, "bot"),
    ("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", 0.1, "bot"),
    ("DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", 0.1, "bot"),
    ("Mozilla/5.0 (Windows NT 6.1; WOW64; Trident/7.0; rv:11.0) like Gecko", 0.1, "browser"),
)

_CATEGORIES = (
    "shoes", "sneakers", "boots", "jackets", "t-shirts", "jeans", "dresses", "accessories", "bags", "watches",
    "sportswear", "kids", "sale", "new-arrivals", "outdoor", "running", "hoodies", "socks", "hats", "gloves",
)
_SEARCH_TERMS = (
    "sneakers", "winter+jacket", "running+shoes", "black+boots", "hoodie", "jeans", "nike", "adidas", "rain+jacket",
    "gift+card", "socks", "backpack", "dress", "white+sneakers", "wool+coat", "leggings", "sale", "sunglasses",
    "trail+running", "leather+bag", "kids+shoes", "beanie", "puffer+jacket", "chelsea+boots", "gym+bag",
    "swimwear", "linen+shirt", "smart+watch", "wallet", "umbrella",
)
_ADJECTIVES = ("classic", "urban", "trail", "lightweight", "premium", "vintage", "waterproof", "essential",
               "slim-fit", "oversized", "merino", "organic-cotton", "retro", "insulated", "everyday")
_NOUNS = ("leather-sneaker", "running-shoe", "parka", "hoodie", "chino", "denim-jacket", "rain-jacket", "beanie",
          "backpack", "crew-sock", "t-shirt", "chelsea-boot", "fleece", "tote-bag", "puffer-vest", "wool-coat")
_BLOG_SLUGS = (
    "how-to-choose-running-shoes", "winter-layering-guide", "sneaker-care-101", "our-sustainability-report-2025",
    "best-gifts-under-50", "size-guide-explained", "black-friday-2025-deals", "behind-the-design-urban-parka",
    "trail-running-for-beginners", "caring-for-leather-boots", "capsule-wardrobe-essentials", "new-store-berlin",
)
_STATIC_ASSETS = (
    ("/static/js/main.4f8c2a1e.js", 187_342, 6.0), ("/static/css/main.7e6f5a4b.css", 48_211, 5.5),
    ("/static/js/vendor.9b3d7e20.js", 412_875, 5.0), ("/static/js/runtime.1a2b3c4d.js", 1_532, 4.0),
    ("/static/media/logo.5d2a9c1e.svg", 3_487, 4.0), ("/static/fonts/inter-var.2b9f4e1a.woff2", 98_640, 2.5),
    ("/static/css/vendor.3c2d1e0f.css", 21_904, 2.5), ("/static/img/hero-winter.8c1f3a2d.webp", 142_318, 2.0),
    ("/static/js/chunk-product.0f1e2d3c.js", 34_876, 2.0), ("/static/js/chunk-checkout.6a5b4c3d.js", 58_230, 0.8),
    ("/manifest.json", 612, 1.0), ("/sw.js", 2_340, 1.0), ("/static/media/icons.b7a6c5d4.svg", 18_942, 1.5),
)
_UTM = ("", "?utm_source=google&utm_medium=cpc&utm_campaign=winter_sale_2026",
        "?utm_source=newsletter&utm_medium=email&utm_campaign=2026-01-weekly",
        "?utm_source=facebook&utm_medium=social&utm_campaign=retargeting", "?gclid=Cj0KCQiA4fi7BhC5ARIsAEV1YiY",
        "?fbclid=IwAR2xYz8k3Lq9mN0pQrStUvWxYz1a2b3c4d5e6f7g8h9i0j")
_EXTERNAL_REFERERS = (
    "https://www.google.com/", "https://www.google.de/", "https://www.bing.com/", "https://l.facebook.com/",
    "https://duckduckgo.com/", "https://www.instagram.com/", "https://t.co/", "android-app://com.google.android.gm/",
    "https://www.google.co.uk/", "https://www.pinterest.com/", "https://search.yahoo.com/", "https://www.reddit.com/",
    "https://www.youtube.com/", "https://l.instagram.com/", "https://yandex.ru/", "https://news.ycombinator.com/",
)


def _product_slug(pid: int) -> str:
    # Derived from the id, so a product's URL is the same every time it is requested.
    return f"{_ADJECTIVES[pid % len(_ADJECTIVES)]}-{_NOUNS[(pid // 7) % len(_NOUNS)]}"


class _Route(NamedTuple):
    # Draws in the nginx loop use _table() lookup tables of _TABLE_SIZE slots.
    method: str | None  # fixed method, else drawn from methods
    methods: list[str] | None
    path: str | None  # fixed path, else built by path_fn
    path_fn: Callable[[Callable[[], float]], str] | None
    statuses: list[int]
    sizes: dict[int, tuple[int, int]]  # status -> (base, spread) where the body is not log-normal
    size_median: float
    size_sigma: float
    rt_median: float  # seconds
    referers: list[str] | None  # None: never sent
    p_no_referer: float
    client: str  # "pool", "probe" (load-balancer health checks) or "scraper" (Prometheus)


_NGINX_DEFAULT_BODIES = {301: (169, 0), 302: (145, 0), 304: (0, 0), 204: (0, 0), 101: (0, 0), 403: (153, 0),
                         404: (153, 0), 405: (157, 0), 413: (177, 0), 499: (0, 0), 500: (177, 0),
                         502: (157, 0), 503: (190, 0), 504: (167, 0)}
_API_ERROR_BODIES = {304: (0, 0), 204: (0, 0), 400: (70, 90), 401: (48, 20), 403: (52, 20), 404: (46, 30),
                     409: (80, 40), 422: (110, 160), 429: (64, 10), 499: (0, 0), 500: (58, 10), 502: (157, 0),
                     503: (190, 0), 504: (167, 0)}


def _nginx_routes(pool: random.Random) -> _Dist[_Route]:
    s_static = _weighted([(200, 78), (304, 21), (404, 0.6), (499, 0.4)])
    s_page = _weighted([(200, 90), (304, 3), (301, 1.5), (302, 1.0), (404, 2.5), (499, 0.8), (500, 0.4), (502, 0.4),
                        (503, 0.2), (504, 0.2)])
    s_api_get = _weighted([(200, 92), (304, 1.2), (400, 0.5), (401, 1.6), (403, 0.3), (404, 2.6), (429, 0.4),
                           (499, 0.6), (500, 0.4), (502, 0.2), (503, 0.1), (504, 0.1)])
    s_api_write = _weighted([(200, 60), (201, 24), (204, 4), (400, 3), (401, 1.5), (409, 1.5), (422, 2.5), (429, 0.8),
                             (500, 1.2), (502, 0.3), (504, 0.2)])
    s_login = _weighted([(200, 80), (401, 16), (429, 2.5), (500, 0.5)])
    s_scan = _weighted([(404, 94), (403, 5), (301, 1)])
    s_health = _weighted([(200, 999), (503, 1)])
    s_redirect = _weighted([(301, 96), (404, 4)])
    m_get = _weighted([("GET", 96), ("HEAD", 4)])
    m_user = _weighted([("GET", 86), ("PUT", 6), ("PATCH", 5), ("DELETE", 1), ("OPTIONS", 2)])
    m_cart = _weighted([("GET", 55), ("POST", 35), ("OPTIONS", 10)])
    m_item = _weighted([("POST", 55), ("DELETE", 30), ("PATCH", 15)])
    m_scan = _weighted([("GET", 85), ("POST", 15)])
    pages = _zipf(list(range(1, 31)), 1.3)
    cats = _zipf(_CATEGORIES, 0.9)
    terms = _zipf(_SEARCH_TERMS, 1.0)
    sorts = _weighted([("relevance", 60), ("price_asc", 15), ("price_desc", 8), ("newest", 17)])
    utm = _weighted([(u, 92.0 if not u else 1.6) for u in _UTM])
    blog = _zipf(_BLOG_SLUGS, 1.1)
    variants = _weighted([("thumb", 55), ("medium", 30), ("large", 15)])
    scan_paths = _zipf(["/wp-login.php", "/.env", "/xmlrpc.php", "/.git/config", "/wp-admin/setup-config.php",
                        "/phpmyadmin/index.php", "/admin/.env", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
                        "/.aws/credentials", "/server-status", "/cgi-bin/luci/;stok=/locale", "/actuator/env",
                        "/boaform/admin/formLogin", "/owa/auth/logon.aspx", "/.DS_Store", "/config.json"], 1.0)

    internal = [f"{_ORIGIN}/", f"{_ORIGIN}/cart", f"{_ORIGIN}/checkout", f"{_ORIGIN}/account", f"{_ORIGIN}/login"]
    internal += [f"{_ORIGIN}/category/{c}" for c in _CATEGORIES[:10]]
    for _ in range(16):
        pid = _skewed_int(pool.random, 60_000)
        internal.append(f"{_ORIGIN}/products/{pid}/{_product_slug(pid)}")
    internal += [f"{_ORIGIN}/search?q={t}" for t in _SEARCH_TERMS[:6]]
    pool.shuffle(internal)
    ref_internal = _zipf(internal, 1.0)
    mixed = [(r, w * 0.6) for r, w in zip(internal, _zipf_weights(len(internal)))]
    mixed += [(r, w * 0.4 * 3.0) for r, w in zip(_EXTERNAL_REFERERS, _zipf_weights(len(_EXTERNAL_REFERERS), 1.4))]
    ref_mixed = _weighted(mixed)

    # Routes share distributions; build each lookup table once.  The cache holds on to each
    # distribution too: a collected one's id() could be reused by the next inline _weighted().
    table_cache: dict[int, tuple[_Dist, list]] = {}

    def tables(dist: _Dist) -> list:
        if id(dist) not in table_cache:
            table_cache[id(dist)] = (dist, _table(dist))
        return table_cache[id(dist)][1]

    def route(weight: float, path: str | Callable[[Callable[[], float]], str], method: str | _Dist[str],
              statuses: _Dist[int], median: float, sigma: float, rt: float, referers: _Dist[str] | None,
              p_noref: float, *, api: bool = False, client: str = "pool") -> tuple[_Route, float]:
        return _Route(
            method=method if isinstance(method, str) else None,
            methods=None if isinstance(method, str) else tables(method),
            path=path if isinstance(path, str) else None,
            path_fn=None if isinstance(path, str) else path,
            statuses=tables(statuses), sizes=_API_ERROR_BODIES if api else _NGINX_DEFAULT_BODIES,
            size_median=median, size_sigma=sigma, rt_median=rt,
            referers=None if referers is None else tables(referers), p_no_referer=p_noref, client=client,
        ), weight

    routes = [route(w, p, m_get, s_static, size, 0.0, 0.0006, ref_internal, 0.08) for p, size, w in _STATIC_ASSETS]
    routes += [
        route(7.0, "/", m_get, s_page, 38_000, 0.08, 0.025, ref_mixed, 0.45),
        route(2.5, "/favicon.ico", "GET", s_static, 15_086, 0.0, 0.0004, ref_internal, 0.3),
        route(0.8, "/robots.txt", "GET", s_static, 412, 0.0, 0.0003, None, 1.0),
        route(0.3, "/sitemap.xml", "GET", s_static, 284_113, 0.0, 0.004, None, 1.0),
        route(0.6, "/apple-touch-icon.png", "GET", _weighted([(404, 70), (200, 30)]), 7_823, 0.0, 0.0003, None, 1.0),
        route(9.0, lambda r: f"/api/v1/products/{_skewed_int(r, 60_000)}", m_get, s_api_get, 2_400, 0.45, 0.018,
              ref_internal, 0.3, api=True),
        route(8.0, lambda r: f"/api/v1/users/{_skewed_int(r, 250_000)}", m_user, s_api_get, 880, 0.35, 0.015,
              ref_internal, 0.35, api=True),
        route(4.5, lambda r: f"/api/v1/products?category={cats.pick(r)}&page={pages.pick(r)}&sort={sorts.pick(r)}",
              "GET", s_api_get, 14_500, 0.55, 0.045, ref_internal, 0.25, api=True),
        route(3.5, lambda r: f"/api/v1/search?q={terms.pick(r)}&limit=24", "GET", s_api_get, 11_800, 0.6, 0.085,
              ref_internal, 0.25, api=True),
        route(3.0, lambda r: f"/api/v1/users/{_skewed_int(r, 250_000)}/orders?page={pages.pick(r)}", "GET",
              s_api_get, 3_900, 0.7, 0.032, ref_internal, 0.35, api=True),
        route(3.0, "/api/v1/cart", m_cart, s_api_write, 1_250, 0.5, 0.021, ref_internal, 0.3, api=True),
        route(1.6, lambda r: f"/api/v1/cart/items/{_skewed_int(r, 60_000)}", m_item, s_api_write, 1_300, 0.4, 0.024,
              ref_internal, 0.3, api=True),
        route(2.2, "/api/v1/auth/refresh", "POST", s_login, 612, 0.05, 0.011, ref_internal, 0.4, api=True),
        route(1.0, "/api/v1/auth/login", "POST", s_login, 640, 0.05, 0.12, ref_internal, 0.2, api=True),
        route(0.8, "/api/v1/orders", "POST", s_api_write, 2_100, 0.3, 0.21, ref_internal, 0.2, api=True),
        route(1.4, lambda r: f"/api/v1/orders/{4_812_000 - _skewed_int(r, 90_000)}", "GET", s_api_get, 2_900, 0.4,
              0.027, ref_internal, 0.35, api=True),
        route(1.0, lambda r: f"/api/v1/users/{_skewed_int(r, 250_000)}/avatar", "GET", s_api_get, 9_800, 0.8, 0.006,
              ref_internal, 0.2, api=True),
        route(6.0, lambda r: (lambda pid: f"/products/{pid}/{_product_slug(pid)}{utm.pick(r)}")(_skewed_int(r, 60_000)),
              m_get, s_page, 61_000, 0.15, 0.048, ref_mixed, 0.4),
        route(2.5, lambda r: f"/category/{cats.pick(r)}" + ("" if r() < 0.7 else f"?page={pages.pick(r)}"), m_get,
              s_page, 72_000, 0.2, 0.052, ref_mixed, 0.35),
        route(9.0, lambda r: f"/images/products/{_skewed_int(r, 60_000)}/{variants.pick(r)}.webp", "GET",
              _weighted([(200, 74), (304, 24), (404, 2)]), 28_000, 0.7, 0.0008, ref_internal, 0.1),
        route(0.8, lambda r: f"/blog/{blog.pick(r)}", m_get, s_page, 46_000, 0.3, 0.03, ref_mixed, 0.35),
        route(0.9, "/cart", "GET", s_page, 31_000, 0.1, 0.035, ref_internal, 0.05),
        route(0.6, "/checkout", "GET", s_page, 44_000, 0.1, 0.06, ref_internal, 0.05),
        route(0.7, "/login", "GET", s_page, 21_000, 0.05, 0.02, ref_mixed, 0.3),
        route(0.5, "/account", "GET", s_page, 27_000, 0.1, 0.04, ref_internal, 0.1),
        route(0.6, "/shop", "GET", s_redirect, 169, 0.0, 0.0, ref_mixed, 0.6),
        route(0.35, lambda r: scan_paths.pick(r), m_scan, s_scan, 153, 0.0, 0.001, None, 1.0),
        route(0.4, "/ws/notifications", "GET", _weighted([(101, 97), (400, 3)]), 0, 0.0, 38.0, ref_internal, 0.0),
        route(3.5, lambda r: "/healthz" if r() < 0.6 else "/health", "GET", s_health, 2, 0.0, 0.0004, None, 1.0,
              client="probe"),
        route(0.4, "/metrics", "GET", s_health, 28_000, 0.05, 0.009, None, 1.0, client="scraper"),
    ]
    return _weighted(routes)


def _nginx_clients(pool: random.Random, n: int = 4000) -> _Dist[tuple[str, bytes, str, str, bool]]:
    uas = _Dist([u for u, _, _ in _USER_AGENTS], [w for _, w, _ in _USER_AGENTS])
    classes = {u: c for u, _, c in _USER_AGENTS}
    clients: list[tuple[str, bytes, str, str, bool]] = []
    seen: set[str] = set()
    while len(clients) < n:
        ip = _public_ipv6(pool) if pool.random() < 0.06 else _public_ipv4(pool)
        if ip in seen:
            continue
        seen.add(ip)
        ua = uas.pick(pool.random)
        browser = classes[ua] == "browser"
        proto = "HTTP/2.0" if browser and pool.random() < 0.7 else "HTTP/1.1"
        clients.append((ip, ip.encode(), ua, proto, browser))
    # Zipf over randomly drawn clients: a few carrier NATs and office gateways dominate.
    return _zipf(clients, 1.05)


def _gen_nginx(ctx: _Ctx) -> Iterator[Record]:
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    routes = _nginx_routes(pool)
    clients = _nginx_clients(pool)
    probes = [(ip, ip.encode(), ua, "HTTP/1.1", False) for ip, ua in (
        ("10.0.1.10", "ELB-HealthChecker/2.0"), ("10.0.2.10", "ELB-HealthChecker/2.0"),
        ("10.0.3.10", "ELB-HealthChecker/2.0"), ("10.42.0.1", "kube-probe/1.31"))]
    scraper = ("10.0.5.20", b"10.0.5.20", "Prometheus/2.55.1", "HTTP/1.1", False)
    # The access logs of six web servers are shipped to one topic.
    pick_headers = hdr.picker([f"web-{i:02d}" for i in range(1, 7)]) if hdr is not None else None
    normal = _normal_table(pool)
    exp = math.exp
    n_tab = float(_TABLE_SIZE)
    last_sec = -1
    now = ""

    while True:
        times = clock.block()
        for t, route, client in zip(times, routes.block(rng), clients.block(rng)):
            ms = int(t)
            if ms // 1000 != last_sec:
                last_sec = ms // 1000
                now = _fmt_access(last_sec)
            (method, methods, path, path_fn, statuses, sizes, median, sigma, rt_median, referers, p_noref,
             mode) = route
            if mode != "pool":
                client = probes[int(rnd() * 4.0)] if mode == "probe" else scraper
            ip, ip_b, ua, proto, browser = client
            if methods is not None:
                method = methods[int(rnd() * n_tab)]
            if path_fn is not None:
                path = path_fn(rnd)
            status = statuses[int(rnd() * n_tab)]
            fixed = sizes.get(status)
            if fixed is not None:
                size = fixed[0] + int(fixed[1] * rnd()) if fixed[1] else fixed[0]
            elif sigma:
                size = int(median * exp(sigma * normal[int(rnd() * n_tab)]))
            else:
                size = int(median)
            if method == "HEAD":
                size = 0
            rt = rt_median * exp(0.9 * normal[int(rnd() * n_tab)])
            if status == 504:
                rt += 60.0  # proxy_read_timeout
            if referers is None or not browser or rnd() < p_noref:
                ref = "-"
            else:
                ref = referers[int(rnd() * n_tab)]
            value = (f'{ip} - - [{now}] "{method} {path} {proto}" {status} {size} '
                     f'"{ref}" "{ua}" {rt:.3f}').encode()
            yield Record(ip_b if keyed else None, value, pick_headers() if pick_headers is not None else (), ms)


# --------------------------------------------------------------------------------------------
# nginx-error: error.log


def _gen_nginx_error(ctx: _Ctx) -> Iterator[Record]:
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    machines = []
    for i in range(1, 5):
        master = pool.randrange(700, 1500)
        first = master + pool.randrange(1, 40)
        workers = [[first + w, pool.randrange(10_000, 3_000_000)] for w in range(4)]
        machines.append((f"web-{i:02d}", master, workers))
    machine_dist = _Dist(machines, [4.0, 3.0, 2.0, 1.5])
    clients = _zipf([_public_ipv4(pool) for _ in range(1500)], 1.0)
    scanners = _zipf([_public_ipv4(pool) for _ in range(300)], 0.9)
    upstreams = [f"10.0.3.{n}:8080" for n in (11, 12, 13, 14, 21, 22)]
    missing = _zipf([
        "/favicon.ico", "/apple-touch-icon.png", "/apple-touch-icon-precomposed.png", "/wp-login.php", "/.env",
        "/ads.txt", "/xmlrpc.php", "/.well-known/security.txt", "/.git/config", "/sitemap_index.xml",
        "/static/js/main.4f8c2a1e.js.map", "/static/js/vendor.9b3d7e20.js.map", "/wp-content/plugins/wp-file-manager/readme.txt",
        "/phpmyadmin/index.php", "/admin/.env", "/config.json", "/.aws/credentials", "/server-status",
        "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php", "/images/products/0/thumb.webp",
        "/.well-known/traffic-advice", "/app-ads.txt", "/browserconfig.xml", "/humans.txt",
    ], 1.0)
    api_paths = _zipf([
        "/api/v1/products", "/api/v1/search", "/api/v1/cart", "/api/v1/orders", "/api/v1/users/me",
        "/api/v1/auth/refresh", "/api/v1/auth/login", "/api/v1/recommendations", "/api/v1/inventory/sync",
        "/api/v1/reports/export", "/api/v1/uploads",
    ], 1.0)
    ssl_errors = _zipf([
        "SSL_do_handshake() failed (SSL: error:0A00006C:SSL routines::bad key share) while SSL handshaking",
        "SSL_do_handshake() failed (SSL: error:0A000102:SSL routines::unsupported protocol) while SSL handshaking",
        "SSL_do_handshake() failed (SSL: error:0A0000C1:SSL routines::no shared cipher) while SSL handshaking",
        "SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong version number) while SSL handshaking",
        "SSL_read() failed (SSL: error:0A000126:SSL routines::unexpected eof while reading) while keepalive",
        "SSL_do_handshake() failed (SSL: error:0A000076:SSL routines::no suitable signature algorithm) while SSL handshaking",
    ], 1.2)
    www, api, static, admin = _SITE, "api.example-shop.com", "static.example-shop.com", "admin.example-shop.com"
    refs = _zipf([f"{_ORIGIN}/", f"{_ORIGIN}/cart", f"{_ORIGIN}/checkout", f"{_ORIGIN}/products/1042/classic-leather-sneaker",
                  f"{_ORIGIN}/category/shoes"], 1.0)
    now_text = _SecondText(_fmt_slashed)

    def api_request(r: Callable[[], float]) -> tuple[str, str]:
        path = api_paths.pick(r)
        method = "POST" if path in ("/api/v1/orders", "/api/v1/auth/login", "/api/v1/auth/refresh",
                                    "/api/v1/uploads", "/api/v1/cart") and r() < 0.7 else "GET"
        if path == "/api/v1/products" and r() < 0.6:
            path = f"{path}/{_skewed_int(r, 60_000)}"
        return method, path

    def upstream_tail(r: Callable[[], float], server: str, method: str, path: str, up: str) -> str:
        return (f', client: {clients.pick(r)}, server: {server}, request: "{method} {path} HTTP/1.1", '
                f'upstream: "http://{up}{path}", host: "{server}"')

    # Each template returns (message, server name or None when the line has no request context).
    def t_open(r: Callable[[], float]) -> tuple[str, str | None]:
        path = missing.pick(r)
        scanner = path.startswith(("/.", "/wp", "/xml", "/php", "/admin", "/vendor", "/server", "/config"))
        ip = scanners.pick(r) if scanner else clients.pick(r)
        host = ip if scanner and r() < 0.5 else www
        tail = f', referrer: "{refs.pick(r)}"' if not scanner and r() < 0.4 else ""
        return (f'open() "/usr/share/nginx/html{path}" failed (2: No such file or directory), client: {ip}, '
                f'server: {www}, request: "GET {path} HTTP/1.1", host: "{host}"{tail}'), www

    def upstream_msg(text: str) -> Callable[[Callable[[], float]], tuple[str, str | None]]:
        def t(r: Callable[[], float]) -> tuple[str, str | None]:
            method, path = api_request(r)
            return text + upstream_tail(r, api, method, path, upstreams[int(r() * len(upstreams))]), api
        return t

    def t_no_live(r: Callable[[], float]) -> tuple[str, str | None]:
        method, path = api_request(r)
        return "no live upstreams while connecting to upstream" + upstream_tail(r, api, method, path, "orders_backend"), api

    def t_limit(r: Callable[[], float]) -> tuple[str, str | None]:
        method, path = api_request(r)
        return (f'limiting requests, excess: {r() * 40:.3f} by zone "api_limit", client: {clients.pick(r)}, '
                f'server: {api}, request: "{method} {path} HTTP/1.1", host: "{api}"'), api

    def t_delay(r: Callable[[], float]) -> tuple[str, str | None]:
        method, path = api_request(r)
        return (f'delaying request, excess: {r() * 10:.3f}, by zone "api_limit", client: {clients.pick(r)}, '
                f'server: {api}, request: "{method} {path} HTTP/1.1", host: "{api}"'), api

    def t_too_large(r: Callable[[], float]) -> tuple[str, str | None]:
        size = int(10_485_760 * (1.0 + 9.0 * r() * r()))
        return (f"client intended to send too large body: {size} bytes, client: {clients.pick(r)}, server: {api}, "
                f'request: "POST /api/v1/uploads HTTP/1.1", host: "{api}"'), api

    def t_buffered(r: Callable[[], float]) -> tuple[str, str | None]:
        n = int(r() * 9_999_999_999)
        method, path = "GET", "/api/v1/reports/export" if r() < 0.6 else f"/api/v1/products?category={_CATEGORIES[int(r() * 20)]}"
        return (f"an upstream response is buffered to a temporary file /var/cache/nginx/proxy_temp/{n % 10}/"
                f"{(n // 10) % 100:02d}/{n:010d} while reading upstream"
                + upstream_tail(r, api, method, path, upstreams[int(r() * len(upstreams))])), api

    def t_body_buffered(r: Callable[[], float]) -> tuple[str, str | None]:
        return (f"a client request body is buffered to a temporary file /var/cache/nginx/client_temp/"
                f"{int(r() * 9_999_999_999):010d}, client: {clients.pick(r)}, server: {api}, "
                f'request: "POST /api/v1/uploads HTTP/1.1", host: "{api}"'), api

    def t_ssl(r: Callable[[], float]) -> tuple[str, str | None]:
        ip = scanners.pick(r) if r() < 0.6 else clients.pick(r)
        return f"{ssl_errors.pick(r)}, client: {ip}, server: 0.0.0.0:443", "0.0.0.0:443"

    def t_forbidden(r: Callable[[], float]) -> tuple[str, str | None]:
        path = "/admin/" if r() < 0.5 else "/admin/login"
        return (f'access forbidden by rule, client: {scanners.pick(r)}, server: {admin}, '
                f'request: "GET {path} HTTP/1.1", host: "{admin}"'), admin

    def t_dir_index(r: Callable[[], float]) -> tuple[str, str | None]:
        d = "/static/" if r() < 0.5 else "/static/js/"
        return (f'directory index of "/usr/share/nginx/html{d}" is forbidden, client: {scanners.pick(r)}, '
                f'server: {static}, request: "GET {d} HTTP/1.1", host: "{static}"'), static

    def t_disabled(r: Callable[[], float]) -> tuple[str, str | None]:
        method, path = api_request(r)
        return ("upstream server temporarily disabled while connecting to upstream"
                + upstream_tail(r, api, method, path, upstreams[int(r() * len(upstreams))])), api

    def t_conns(r: Callable[[], float]) -> tuple[str, str | None]:
        method, path = api_request(r)
        return ("4096 worker_connections are not enough while connecting to upstream"
                + upstream_tail(r, api, method, path, upstreams[int(r() * len(upstreams))])), api

    # (weight, level, template, has a connection number)
    templates = _Dist([
        ("error", t_open, True),
        ("error", upstream_msg("upstream timed out (110: Connection timed out) while reading response header from upstream"), True),
        ("error", upstream_msg("connect() failed (111: Connection refused) while connecting to upstream"), True),
        ("error", upstream_msg("recv() failed (104: Connection reset by peer) while reading response header from upstream"), True),
        ("error", upstream_msg("upstream prematurely closed connection while reading response header from upstream"), True),
        ("error", upstream_msg("upstream sent too big header while reading response header from upstream"), True),
        ("error", t_no_live, True),
        ("error", t_limit, True),
        ("warn", t_delay, True),
        ("error", t_too_large, True),
        ("warn", t_buffered, True),
        ("warn", t_body_buffered, True),
        ("crit", t_ssl, True),
        ("error", t_forbidden, True),
        ("error", t_dir_index, True),
        ("warn", t_disabled, True),
        ("alert", t_conns, True),
        ("notice", None, False),
    ], [30, 14, 8, 5, 4, 1.5, 2, 6, 5, 3, 6, 2, 5, 2, 1.5, 2, 0.3, 1.2])
    notices = _zipf(["signal process started", "signal 1 (SIGHUP) received from {pid}, reconfiguring",
                     "reconfiguring", 'using the "epoll" event method', "start worker processes",
                     "start worker process {pid}", "gracefully shutting down", "exiting", "exit",
                     "worker process {pid} exited with code 0"], 0.8)

    while True:
        times = clock.block()
        for t, (host, master, workers), (level, template, has_conn) in zip(
                times, machine_dist.block(rng), templates.block(rng)):
            ms = int(t)
            if template is None:
                pid = master
                msg = notices.pick(rnd).replace("{pid}", str(workers[int(rnd() * 4.0)][0]))
                server = None
            else:
                worker = workers[int(rnd() * 4.0)]
                pid = worker[0]
                # Each worker accepts many connections between two logged errors.
                worker[1] += 1 + int(-400.0 * math.log(1.0 - rnd()))
                body, server = template(rnd)
                msg = f"*{worker[1]} {body}" if has_conn else body
            value = f"{now_text(ms // 1000)} [{level}] {pid}#{pid}: {msg}".encode()
            key = (server or host).encode() if keyed else None
            yield Record(key, value, hdr.make(host) if hdr is not None else (), ms)


# --------------------------------------------------------------------------------------------
# json-logs: journald entries as `journalctl -o json` prints them


class _Unit(NamedTuple):
    unit: str | None  # None: the kernel, which has no unit, pid or credentials
    identifier: str
    comm: str
    exe: str
    cmdline: str
    uid: int
    transport: str
    facility: int
    spawns: bool  # a new pid per job (cron, sshd sessions, postgres backends)
    templates: _Dist[tuple[int, Callable[[_JournalHost, int], str]]]  # (priority, message)


class _JournalHost:
    __slots__ = ("name", "ip", "machine_id", "boot_id", "seqnum_id", "boot_us", "seq", "next_pid", "units",
                 "procs", "pods", "session")

    def __init__(self, pool: random.Random, name: str, ip: str, start_us: int,
                 units: _Dist[_Unit]) -> None:
        self.name = name
        self.ip = ip
        self.machine_id = _hex(pool, 32)
        self.boot_id = _hex(pool, 32)
        self.seqnum_id = _hex(pool, 32)
        self.boot_us = start_us - pool.randrange(3 * 86_400, 90 * 86_400) * 1_000_000
        self.seq = pool.randrange(100_000, 9_000_000)
        self.next_pid = pool.randrange(20_000, 400_000)
        self.units = units
        self.procs: dict[str, tuple[str, int]] = {}  # unit -> (static JSON fields, daemon pid)
        self.pods: list[tuple[str, str, str, str]] = []  # (namespace, pod, pod uid, container id)
        self.session = pool.randrange(100, 5_000)


def _journal_static(pool: random.Random, host: _JournalHost, u: _Unit) -> str:
    if u.unit is None:
        fields: dict[str, str] = {"_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": "kernel"}
    else:
        slice_ = "-.slice" if u.unit == "init.scope" else "system.slice"
        cgroup = "/init.scope" if u.unit == "init.scope" else f"/system.slice/{u.unit}"
        fields = {
            "_TRANSPORT": u.transport, "SYSLOG_FACILITY": str(u.facility), "SYSLOG_IDENTIFIER": u.identifier,
            "_UID": str(u.uid), "_GID": str(u.uid), "_COMM": u.comm, "_EXE": u.exe, "_CMDLINE": u.cmdline,
            "_CAP_EFFECTIVE": "1ffffffffff" if u.uid == 0 else "0", "_SYSTEMD_CGROUP": cgroup,
            "_SYSTEMD_UNIT": u.unit, "_SYSTEMD_SLICE": slice_, "_SYSTEMD_INVOCATION_ID": _hex(pool, 32),
        }
    return _JSON.encode(fields)[1:-1]


def _journal_units(pool: random.Random, rng: random.Random) -> dict[str, _Unit]:
    rnd = rng.random
    admins = ["ubuntu", "deploy", "ansible", "alice", "bob", "ci-runner"]
    uids = {"ubuntu": 1000, "deploy": 1001, "ansible": 1002, "alice": 1003, "bob": 1004, "ci-runner": 1005}
    admin_users = _zipf(admins, 1.0)
    fingerprints = {u: base64.b64encode(pool.randbytes(32)).decode().rstrip("=") for u in admins}
    bad_users = _zipf(["admin", "test", "user", "oracle", "postgres", "git", "ubnt", "support", "guest", "ftpuser",
                       "pi", "steam", "hadoop", "debian", "centos", "ec2-user", "jenkins", "validator", "sol",
                       "minecraft", "ts3", "nagios", "es", "dev"], 0.9)
    attackers = _zipf([_public_ipv4(pool) for _ in range(400)], 1.0)
    admin_ips = _zipf([f"10.8.0.{n}" for n in range(2, 14)] + ["203.0.113.45", "198.51.100.23"], 1.0)
    cron_cmds = _zipf([
        "command -v debian-sa1 > /dev/null && debian-sa1 1 1", "cd / && run-parts --report /etc/cron.hourly",
        "/usr/local/bin/node_exporter_textfile.sh >/dev/null 2>&1", "/usr/local/bin/backup-etc.sh >/dev/null 2>&1",
        "/usr/bin/flock -n /tmp/certbot.lock /usr/bin/certbot renew -q",
        "[ -x /etc/init.d/anacron ] && if [ ! -d /run/systemd/system ]; then /usr/sbin/invoke-rc.d anacron start >/dev/null; fi",
    ], 1.0)
    dbs = _zipf([("orders", "orders_app"), ("users", "users_app"), ("billing", "billing_app"),
                 ("analytics", "metabase")], 1.0)
    statements = _zipf([
        "execute <unnamed>: SELECT o.id, o.status, o.total_cents, o.created_at FROM orders o WHERE o.customer_id = $1 ORDER BY o.created_at DESC LIMIT 50",
        "execute <unnamed>: SELECT * FROM users WHERE id = $1",
        "execute <unnamed>: UPDATE carts SET updated_at = now(), items = $1 WHERE id = $2",
        "execute <unnamed>: INSERT INTO order_items (order_id, product_id, quantity, price_cents) VALUES ($1, $2, $3, $4)",
        "execute <unnamed>: SELECT p.id, p.name, p.price_cents, i.available FROM products p JOIN inventory i ON i.product_id = p.id WHERE p.category = $1 ORDER BY p.rank LIMIT 24 OFFSET $2",
        "statement: SELECT date_trunc('day', created_at) AS day, count(*), sum(total_cents) FROM orders WHERE created_at > now() - interval '30 days' GROUP BY 1 ORDER BY 1",
        "execute <unnamed>: DELETE FROM sessions WHERE expires_at < now()",
        "statement: VACUUM (ANALYZE) public.events",
    ], 1.1)
    tables = _zipf(["orders.public.order_items", "orders.public.orders", "users.public.sessions",
                    "billing.public.invoices", "orders.public.carts"], 1.0)
    api_paths = _zipf(["/api/v1/orders/{id}", "/api/v1/orders", "/api/v1/carts/{id}", "/api/v1/orders/{id}/items",
                       "/internal/health"], 1.0)
    statuses = _weighted([(200, 90), (201, 4), (404, 3), (400, 1.5), (500, 0.7), (503, 0.3)])

    def port() -> int:
        return 32_768 + int(rnd() * 28_000)

    def iso_ms(us: int) -> str:
        return f"{_fmt_iso(us // 1_000_000)}.{(us // 1000) % 1000:03d}Z"

    def req_id() -> str:
        return _uuid(rng)

    def sshd(fn: Callable[[str, str, str], str]) -> Callable[[_JournalHost, int], str]:
        return lambda h, us: fn(admin_users.pick(rnd), attackers.pick(rnd), admin_ips.pick(rnd))

    ssh = _weighted([
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
    cron = _weighted([
        ((6, lambda h, us: "pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)"), 30),
        ((6, lambda h, us: f"(root) CMD ({cron_cmds.pick(rnd)})"), 30),
        ((6, lambda h, us: "pam_unix(cron:session): session closed for user root"), 30),
        ((6, lambda h, us: "(deploy) CMD (/opt/app/bin/cleanup-sessions --older-than 24h)"), 3),
    ])

    def session_started(h: _JournalHost, us: int) -> str:
        h.session += 1
        u = admin_users.pick(rnd)
        return f"Started session-{h.session}.scope - Session {h.session} of User {u}."

    systemd = _weighted([
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
        ((6, lambda h, us: (f"run-containerd-runc-k8s.io-{h.pods[int(rnd() * len(h.pods))][3]}-runc.{_pod_suffix(rng)}.mount: Deactivated successfully."
                            if h.pods else "tmp.mount: Deactivated successfully.")), 4),
    ])
    logind = _weighted([
        ((6, lambda h, us: f"New session {h.session} of user {admin_users.pick(rnd)}."), 4),
        ((6, lambda h, us: f"Session {h.session} logged out. Waiting for processes to exit."), 3),
        ((6, lambda h, us: f"Removed session {h.session}."), 3),
    ])

    def ufw(h: _JournalHost, us: int) -> str:
        dport = (23, 22, 3389, 445, 8080, 5900, 6379, 9200, 2375, 8443)[int(rnd() * rnd() * 10)]
        return (f"[UFW BLOCK] IN=ens5 OUT= MAC=0a:8f:3c:{h.machine_id[:2]}:{h.machine_id[2:4]}:{h.machine_id[4:6]}:"
                f"0a:c1:7d:55:2e:91:08:00 SRC={attackers.pick(rnd)} DST={h.ip} LEN={(40, 44, 60)[int(rnd() * 3)]} "
                f"TOS=0x00 PREC=0x00 TTL={int(30 + rnd() * 220)} ID={int(rnd() * 65535)} PROTO=TCP "
                f"SPT={port()} DPT={dport} WINDOW={(1024, 65535, 29200)[int(rnd() * 3)]} RES=0x00 SYN URGP=0")

    kernel = _weighted([
        ((4, ufw), 60),
        ((4, lambda h, us: "TCP: request_sock_TCP: Possible SYN flooding on port 443. Sending cookies.  Check SNMP counters."), 2),
        ((6, lambda h, us: f"IPv6: ADDRCONF(NETDEV_CHANGE): veth{_hex(rng, 8)}: link becomes ready"), 3),
        ((6, lambda h, us: f"cni0: port {int(1 + rnd() * 30)}(veth{_hex(rng, 8)}) entered forwarding state"), 3),
        ((4, lambda h, us: "nf_conntrack: nf_conntrack: table full, dropping packet"), 0.5),
        ((3, lambda h, us: (f"Memory cgroup out of memory: Killed process {h.next_pid} (python3) total-vm:{int(900_000 + rnd() * 400_000)}kB, "
                            f"anon-rss:{int(500_000 + rnd() * 20_000)}kB, file-rss:{int(rnd() * 40_000)}kB, shmem-rss:0kB, UID:1000 "
                            f"pgtables:{int(1200 + rnd() * 400)}kB oom_score_adj:{(985, 999, 1000)[int(rnd() * 3)]}")), 0.3),
    ])

    def orders_api(level: str) -> Callable[[_JournalHost, int], str]:
        def f(h: _JournalHost, us: int) -> str:
            head = f"time={iso_ms(us)} level={level}"
            if level == "INFO":
                path = api_paths.pick(rnd).replace("{id}", str(4_812_000 - _skewed_int(rnd, 90_000)))
                status = statuses.pick(rnd)
                method = "POST" if path == "/api/v1/orders" else "GET"
                return (f'{head} msg="request completed" method={method} path={path} status={status} '
                        f"duration={2 + 40 * rnd() * rnd():.3f}ms bytes={int(200 + rnd() * 4000)} request_id={req_id()} "
                        f"remote_addr=10.0.{int(rnd() * 4)}.{int(2 + rnd() * 250)}:{port()}")
            if level == "WARN":
                return (f'{head} msg="slow query" query="SELECT id, status, total_cents FROM orders WHERE customer_id = $1 '
                        f'ORDER BY created_at DESC LIMIT 50" duration={250 + rnd() * 2000:.1f}ms request_id={req_id()}')
            return (f'{head} msg="payment provider error" provider=stripe error="context deadline exceeded" '
                    f"order_id=ord_{_hex(rng, 14)} attempt={1 + int(rnd() * 3)} request_id={req_id()}")
        return f

    def pino(level: int, msg: str, extra: Callable[[], str]) -> Callable[[_JournalHost, int], str]:
        def f(h: _JournalHost, us: int) -> str:
            return (f'{{"level":{level},"time":{us // 1000},"pid":{h.procs["users-api.service"][1] if "users-api.service" in h.procs else 1},'
                    f'"hostname":"{h.name}",{extra()},"msg":"{msg}"}}')
        return f

    def users_req() -> str:
        uid = _skewed_int(rnd, 250_000)
        status = statuses.pick(rnd)
        return (f'"reqId":"req-{int(rnd() * 0xFFFFFF):x}","req":{{"method":"GET","url":"/v1/users/{uid}",'
                f'"remoteAddress":"10.0.{int(rnd() * 4)}.{int(2 + rnd() * 250)}"}},"res":{{"statusCode":{status}}},'
                f'"responseTime":{1 + 30 * rnd() * rnd():.3f}')

    users_api = _weighted([
        ((6, pino(30, "request completed", users_req)), 75),
        ((6, pino(30, "session refreshed", lambda: f'"userId":"user-{_skewed_int(rnd, 50_000):06d}"')), 10),
        ((4, pino(40, "rate limit approaching", lambda: f'"userId":"user-{_skewed_int(rnd, 50_000):06d}","remaining":{int(rnd() * 10)}')), 5),
        ((3, pino(50, "redis connection failed", lambda: (
            '"err":{"type":"Error","message":"connect ECONNREFUSED 10.0.4.21:6379","stack":"Error: connect '
            'ECONNREFUSED 10.0.4.21:6379\\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1610:16)"}'))), 1.5),
    ])
    orders = _weighted([((6, orders_api("INFO")), 85), ((4, orders_api("WARN")), 4), ((3, orders_api("ERROR")), 1.5)])

    def billing_line(level: str) -> Callable[[_JournalHost, int], str]:
        def f(h: _JournalHost, us: int) -> str:
            stamp = f"{_fmt_spaced(us // 1_000_000)},{(us // 1000) % 1000:03d}"
            if level == "INFO":
                return (f"{stamp} INFO billing.worker: processed invoice inv_{_hex(rng, 12)} "
                        f"customer=cus_{_skewed_int(rnd, 250_000)} amount={5 + rnd() * 300:.2f} EUR in {rnd() * 0.8:.3f}s")
            if level == "WARNING":
                return f"{stamp} WARNING billing.worker: retrying charge for invoice inv_{_hex(rng, 12)} (attempt 2/5): card_declined"
            return (f"{stamp} ERROR billing.worker: webhook delivery failed: HTTPSConnectionPool(host='hooks.example-shop.com', "
                    "port=443): Read timed out. (read timeout=10)")
        return f

    billing = _weighted([((6, billing_line("INFO")), 90), ((4, billing_line("WARNING")), 6), ((3, billing_line("ERROR")), 1)])

    def pg(body: Callable[[_JournalHost, int], str], user_db: bool = True) -> Callable[[_JournalHost, int], str]:
        def f(h: _JournalHost, us: int) -> str:
            stamp = f"{_fmt_spaced(us // 1_000_000)}.{(us // 1000) % 1000:03d} UTC [{h.next_pid}]"
            if user_db:
                db, user = dbs.pick(rnd)
                return f"{stamp} {user}@{db} {body(h, us)}"
            return f"{stamp} {body(h, us)}"
        return f

    postgres = _weighted([
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
                               f"lsn=3A/{_hex(rng, 8).upper()}, redo lsn=3A/{_hex(rng, 8).upper()}"), False)), 2),
        ((4, pg(lambda h, us: 'ERROR:  duplicate key value violates unique constraint "users_email_key"')), 1.5),
        ((3, pg(lambda h, us: 'FATAL:  password authentication failed for user "metabase"')), 0.5),
    ])

    def klog(sev: str, src: str, body: Callable[[_JournalHost], str]) -> Callable[[_JournalHost, int], str]:
        def f(h: _JournalHost, us: int) -> str:
            pid = h.procs["kubelet.service"][1]
            return f"{sev}{_fmt_klog(us // 1_000_000)}.{us % 1_000_000:06d} {pid:>7} {src}] {body(h)}"
        return f

    def a_pod(h: _JournalHost) -> tuple[str, str, str, str]:
        return h.pods[int(rnd() * len(h.pods))]

    kubelet = _weighted([
        ((6, klog("I", "kubelet.go:2431", lambda h: (lambda p: f'"SyncLoop (probe)" probe="readiness" status="ready" pod="{p[0]}/{p[1]}"')(a_pod(h)))), 25),
        ((6, klog("I", "kubelet.go:2469", lambda h: (lambda p: f'"SyncLoop (PLEG): event for pod" pod="{p[0]}/{p[1]}" event={{"ID":"{p[2]}","Type":"ContainerStarted","Data":"{p[3]}"}}')(a_pod(h)))), 6),
        ((4, klog("I", "prober.go:107", lambda h: (lambda p: f'"Probe failed" probeType="Readiness" pod="{p[0]}/{p[1]}" podUID="{p[2]}" containerName="app" probeResult="failure" output="Get \\"http://10.244.3.17:8080/ready\\": dial tcp 10.244.3.17:8080: connect: connection refused"')(a_pod(h)))), 6),
        ((3, klog("E", "pod_workers.go:1301", lambda h: (lambda p: f'"Error syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"app\\" with CrashLoopBackOff: \\"back-off 5m0s restarting failed container=app pod={p[1]}_{p[0]}({p[2]})\\"" pod="{p[0]}/{p[1]}" podUID="{p[2]}"')(a_pod(h)))), 3),
        ((6, klog("I", "scope.go:117", lambda h: f'"RemoveContainer" containerID="{_hex(rng, 64)}"')), 3),
        ((6, klog("I", "kubelet_volumes.go:163", lambda h: (lambda p: f'"Cleaned up orphaned pod volumes dir" podUID="{p[2]}" path="/var/lib/kubelet/pods/{p[2]}/volumes"')(a_pod(h)))), 2),
        ((4, klog("W", "reflector.go:561", lambda h: 'object-"orders"/"orders-api-config": failed to list *v1.ConfigMap: configmaps "orders-api-config" is forbidden: User "system:node:k8s-node" cannot list resource "configmaps" in API group "" in the namespace "orders": no relationship found between node and this object')), 0.5),
    ])

    def ctrd(level: str, body: Callable[[_JournalHost], str]) -> Callable[[_JournalHost, int], str]:
        def f(h: _JournalHost, us: int) -> str:
            ns = us * 1000 + int(rnd() * 1000)
            return f'time="{_fmt_iso(us // 1_000_000)}.{ns % 1_000_000_000:09d}Z" level={level} {body(h)}'
        return f

    containerd = _weighted([
        ((6, ctrd("info", lambda h: f'msg="StartContainer for \\"{a_pod(h)[3]}\\" returns successfully"')), 6),
        ((6, ctrd("info", lambda h: f"msg=\"shim disconnected\" id={a_pod(h)[3]} namespace=k8s.io")), 5),
        ((4, ctrd("warning", lambda h: f"msg=\"cleaning up after shim disconnected\" id={a_pod(h)[3]} namespace=k8s.io")), 5),
        ((6, ctrd("info", lambda h: f'msg="ImageCreate event name:\\"docker.io/library/nginx:1.27.3\\" labels:{{key:\\"io.cri-containerd.image\\" value:\\"managed\\"}}"')), 2),
        ((6, ctrd("info", lambda h: (lambda p: f'msg="RunPodSandbox for &PodSandboxMetadata{{Name:{p[1]},Uid:{p[2]},Namespace:{p[0]},Attempt:0,}} returns sandbox id \\"{p[3]}\\""')(a_pod(h)))), 2),
        ((6, ctrd("info", lambda h: f'msg="RemoveContainer for \\"{_hex(rng, 64)}\\" returns successfully"')), 3),
    ])

    def u(unit: str | None, ident: str, comm: str, exe: str, cmdline: str, uid: int, transport: str, facility: int,
          spawns: bool, templates: _Dist[tuple[int, Callable[[_JournalHost, int], str]]]) -> _Unit:
        return _Unit(unit, ident, comm, exe, cmdline, uid, transport, facility, spawns, templates)

    return {
        "ssh": u("ssh.service", "sshd", "sshd", "/usr/sbin/sshd", "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
                 0, "syslog", 4, True, ssh),
        "cron": u("cron.service", "CRON", "cron", "/usr/sbin/cron", "/usr/sbin/cron -f -P", 0, "syslog", 10, True, cron),
        "systemd": u("init.scope", "systemd", "systemd", "/usr/lib/systemd/systemd", "/sbin/init", 0, "journal", 3,
                     False, systemd),
        "logind": u("systemd-logind.service", "systemd-logind", "systemd-logind", "/usr/lib/systemd/systemd-logind",
                    "/usr/lib/systemd/systemd-logind", 0, "journal", 4, False, logind),
        "kernel": u(None, "kernel", "", "", "", 0, "kernel", 0, False, kernel),
        "orders-api": u("orders-api.service", "orders-api", "orders-api", "/opt/orders-api/bin/orders-api",
                        "/opt/orders-api/bin/orders-api --config /etc/orders-api/config.yaml", 998, "stdout", 3, False,
                        orders),
        "users-api": u("users-api.service", "users-api", "node", "/usr/bin/node",
                       "/usr/bin/node --enable-source-maps /srv/users-api/dist/server.js", 997, "stdout", 3, False,
                       users_api),
        "billing": u("billing-worker.service", "billing-worker", "python3", "/usr/bin/python3.12",
                     "/srv/billing/.venv/bin/python3 -m billing.worker --queue invoices", 996, "stdout", 3, False,
                     billing),
        "postgres": u("postgresql@16-main.service", "postgres", "postgres", "/usr/lib/postgresql/16/bin/postgres",
                      "postgres: 16/main: checkpointer", 113, "stdout", 3, True, postgres),
        "kubelet": u("kubelet.service", "kubelet", "kubelet", "/usr/bin/kubelet",
                     "/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
                     0, "stdout", 3, False, kubelet),
        "containerd": u("containerd.service", "containerd", "containerd", "/usr/bin/containerd", "/usr/bin/containerd",
                        0, "stdout", 3, False, containerd),
    }


def _gen_json_logs(ctx: _Ctx) -> Iterator[Record]:
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    units = _journal_units(pool, rng)
    roles: list[tuple[str, int, list[tuple[str, float]]]] = [
        ("web", 6, [("ssh", 30), ("kernel", 25), ("systemd", 8), ("cron", 6), ("logind", 2), ("users-api", 25)]),
        ("api", 6, [("orders-api", 60), ("users-api", 20), ("ssh", 8), ("kernel", 5), ("systemd", 4), ("cron", 3),
                    ("logind", 1)]),
        ("db", 3, [("postgres", 60), ("ssh", 10), ("kernel", 5), ("systemd", 5), ("cron", 5), ("logind", 1)]),
        ("k8s-node", 8, [("kubelet", 45), ("containerd", 25), ("systemd", 12), ("kernel", 10), ("ssh", 6), ("cron", 2)]),
        ("worker", 3, [("billing", 70), ("ssh", 10), ("kernel", 6), ("systemd", 6), ("cron", 8)]),
    ]
    # Boot times sit before the stream's first instant; reading it consumes no randomness.
    first_us = int(clock.now) * 1000
    hosts: list[_JournalHost] = []
    for role, count, mix in roles:
        unit_dist = _Dist([units[n] for n, _ in mix], [w for _, w in mix])
        for i in range(1, count + 1):
            net = {"web": 1, "api": 2, "db": 3, "k8s-node": 4, "worker": 5}[role]
            h = _JournalHost(pool, f"{role}-{i:02d}", f"10.0.{net}.{10 + i}", first_us, unit_dist)
            for un in unit_dist.items:
                pid = 1 if un.unit == "init.scope" else pool.randrange(400, 40_000)
                h.procs[un.unit or "kernel"] = (_journal_static(pool, h, un), pid)
            if role == "k8s-node":
                for _ in range(12):
                    ns, app, daemonset = pool.choice([
                        ("orders", "orders-api", False), ("users", "users-api", False), ("payments", "payments-gw", False),
                        ("monitoring", "node-exporter", True), ("kube-system", "kube-proxy", True),
                        ("ingress-nginx", "ingress-nginx-controller", False), ("logging", "fluent-bit", True)])
                    # Deployment pods carry their ReplicaSet's hash; DaemonSet pods only a suffix.
                    pod = f"{app}-{_pod_suffix(pool)}" if daemonset else f"{app}-{_hex(pool, 9)}-{_pod_suffix(pool)}"
                    h.pods.append((ns, pod, _uuid(pool), _hex(pool, 64)))
            hosts.append(h)
    host_dist = _zipf(hosts, 0.6)
    encode = _JSON.encode

    while True:
        times = clock.block()
        for t, h in zip(times, host_dist.block(rng)):
            ms = int(t)
            us = _micros(t, ms)
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


# --------------------------------------------------------------------------------------------
# dns: CoreDNS `log` plugin lines, with the RFC 3339 time a container runtime prefixes


class _DnsAnswer(NamedTuple):
    name: str
    qtype: str
    rcode: str
    flags: str
    answer_bytes: int  # added to the request size to make the response size
    upstream: bool  # forwarded (milliseconds) rather than answered from cache or zone (microseconds)


_RR_BYTES = {"A": 16, "AAAA": 28, "CNAME": 40, "MX": 30, "TXT": 120, "PTR": 45, "SRV": 60, "HTTPS": 70, "NS": 25}
_SOA_BYTES = 93


def _gen_dns(ctx: _Ctx) -> Iterator[Record]:
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    pods = []
    seen: set[str] = set()
    while len(pods) < 1800:
        ip = f"10.244.{pool.randrange(0, 24)}.{pool.randrange(2, 255)}"
        if ip not in seen:
            seen.add(ip)
            pods.append((ip, ip.encode()))
    pods += [(f"10.0.4.{n}", f"10.0.4.{n}".encode()) for n in range(11, 19)]  # node-level resolvers
    pool.shuffle(pods)
    clients = _zipf(pods, 1.0)
    namespaces = ("default", "orders", "users", "payments", "monitoring", "kube-system", "ingress-nginx", "logging")
    services = _zipf([
        ("orders-api", "orders"), ("users-api", "users"), ("redis-master", "orders"), ("postgres-primary", "orders"),
        ("kubernetes", "default"), ("payments-gw", "payments"), ("prometheus-operated", "monitoring"),
        ("kafka-bootstrap", "default"), ("elasticsearch-master", "logging"), ("users-db", "users"),
        ("alertmanager-operated", "monitoring"), ("kube-dns", "kube-system"), ("ingress-nginx-controller", "ingress-nginx"),
        ("loki-gateway", "logging"), ("grafana", "monitoring"), ("payments-db", "payments"),
    ], 1.1)
    # (name, answers as (type, count), cname chain length)
    popular = _zipf([
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
    tail_zones = _zipf(["cloudfront.net.", "elb.eu-west-1.amazonaws.com.", "eu-west-1.compute.internal.",
                        "s3.amazonaws.com.", "execute-api.eu-west-1.amazonaws.com.", "cdn.cloudflare.net.",
                        "azureedge.net.", "akamaiedge.net.", "fastly.net.", "ingest.sentry.io."], 0.9)
    other_types = _weighted([("HTTPS", 35), ("SRV", 20), ("TXT", 12), ("MX", 6), ("CNAME", 6), ("NS", 3), ("PTR", 18)])
    suffixes = ("svc.cluster.local.", "cluster.local.", "eu-west-1.compute.internal.")
    alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

    def qtype_a_aaaa() -> str:
        return "A" if rnd() < 0.6 else "AAAA"

    def internal() -> _DnsAnswer:
        svc, ns = services.pick(rnd)
        qt = qtype_a_aaaa()
        name = f"{svc}.{ns}.svc.cluster.local."
        if qt == "A":
            return _DnsAnswer(name, qt, "NOERROR", "qr,aa,rd", _RR_BYTES["A"] * (1 if rnd() < 0.9 else 3), False)
        return _DnsAnswer(name, qt, "NOERROR", "qr,aa,rd", _SOA_BYTES + 54, False)

    def search_path() -> _DnsAnswer:
        # ndots:5 makes resolvers try the search list first: a burst of NXDOMAIN per external name.
        ext = popular.pick(rnd)[0] if rnd() < 0.8 else f"{services.pick(rnd)[0]}."
        r = rnd()
        suffix = f"{namespaces[int(rnd() * len(namespaces))]}.svc.cluster.local." if r < 0.4 else suffixes[int(rnd() * 3)]
        upstream = suffix.endswith("internal.")
        return _DnsAnswer(f"{ext}{suffix}", qtype_a_aaaa(), "NXDOMAIN", "qr,rd,ra" if upstream else "qr,aa,rd",
                          _SOA_BYTES + (20 if upstream else 54), upstream)

    def external() -> _DnsAnswer:
        name, n, cnames = popular.pick(rnd)
        qt = qtype_a_aaaa()
        if rnd() < 0.004:
            return _DnsAnswer(name, qt, "SERVFAIL", "qr,rd", 0, True)
        n = n if qt == "A" else max(1, n // 2)
        return _DnsAnswer(name, qt, "NOERROR", "qr,rd,ra", cnames * _RR_BYTES["CNAME"] + n * _RR_BYTES[qt], rnd() < 0.15)

    def long_tail() -> _DnsAnswer:
        zone = tail_zones.pick(rnd)
        if zone.startswith("eu-west-1.compute"):
            label = f"ip-10-0-{int(rnd() * 64)}-{int(rnd() * 255)}"
        elif zone.startswith("ingest"):
            label = f"o{int(100_000 + rnd() * 900_000)}"
        else:
            label = "".join(alnum[int(rnd() * 36)] for _ in range(8 + int(rnd() * 10)))
        qt = qtype_a_aaaa()
        if rnd() < 0.08:
            return _DnsAnswer(f"{label}.{zone}", qt, "NXDOMAIN", "qr,rd,ra", _SOA_BYTES, True)
        n = 1 + int(rnd() * 4)
        return _DnsAnswer(f"{label}.{zone}", qt, "NOERROR", "qr,rd,ra", n * _RR_BYTES[qt], rnd() < 0.7)

    def dga() -> _DnsAnswer:
        label = "".join(alnum[int(rnd() * 26)] for _ in range(10 + int(rnd() * 8)))
        tld = ("com.", "net.", "org.", "info.", "xyz.", "top.")[int(rnd() * rnd() * 6)]
        return _DnsAnswer(f"{label}.{tld}", "A", "NXDOMAIN", "qr,rd,ra", _SOA_BYTES - 20, True)

    def other() -> _DnsAnswer:
        qt = other_types.pick(rnd)
        if qt == "PTR":
            name = f"{int(rnd() * 255)}.{int(rnd() * 24)}.244.10.in-addr.arpa."
            if rnd() < 0.7:
                return _DnsAnswer(name, qt, "NOERROR", "qr,aa,rd", _RR_BYTES["PTR"], False)
            return _DnsAnswer(name, qt, "NXDOMAIN", "qr,aa,rd", _SOA_BYTES, False)
        if qt == "SRV":
            svc, ns = services.pick(rnd)
            return _DnsAnswer(f"_grpclb._tcp.{svc}.{ns}.svc.cluster.local.", qt, "NXDOMAIN", "qr,aa,rd", _SOA_BYTES, False)
        name = popular.pick(rnd)[0]
        if qt == "TXT":
            name = f"_dmarc.{name}" if rnd() < 0.5 else name
        return _DnsAnswer(name, qt, "NOERROR", "qr,rd,ra", _RR_BYTES[qt] * (1 + int(rnd() * 3)), rnd() < 0.5)

    categories = _weighted([(internal, 30), (search_path, 24), (external, 30), (long_tail, 11), (dga, 0.6), (other, 4.4)])
    # Two CoreDNS replicas log to the same topic.  Named whether or not headers are on, so that
    # the pool stream, and with it every value, is the same either way.
    replicas = [f"coredns-5d78c9869d-{_pod_suffix(pool)}" for _ in range(2)]
    pick_headers = hdr.picker(replicas) if hdr is not None else None
    normal = _normal_table(pool)
    exp = math.exp
    now_text = _SecondText(_fmt_iso)

    while True:
        times = clock.block()
        for t, (ip, ip_b), category in zip(times, clients.block(rng), categories.block(rng)):
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
            z = normal[int(rnd() * _TABLE_SIZE)]
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


# --------------------------------------------------------------------------------------------
# metrics: Telegraf-style InfluxDB line protocol


def _gfmt(v: float) -> str:
    """A float as Go's strconv.FormatFloat(v, 'f', -1, 64) writes it: shortest digits, no exponent."""
    s = repr(v)
    if "e" in s:
        s = format(v, ".17f").rstrip("0").rstrip(".")
    elif s.endswith(".0"):
        s = s[:-2]
    return s


class _Walk:
    """Mean-reverting random walk: consecutive values stay close, long-run values stay plausible."""

    __slots__ = ("v", "mu", "theta", "sigma", "lo", "hi")

    def __init__(self, v: float, mu: float, sigma: float, lo: float, hi: float, theta: float = 0.05) -> None:
        self.v, self.mu, self.sigma, self.lo, self.hi, self.theta = v, mu, sigma, lo, hi, theta

    def step(self, rnd: Callable[[], float]) -> float:
        v = self.v + self.theta * (self.mu - self.v) + self.sigma * (rnd() + rnd() - 1.0)
        v = self.lo if v < self.lo else self.hi if v > self.hi else v
        self.v = v
        return v


class _Counter:
    """A monotone counter whose rate itself drifts."""

    __slots__ = ("n", "rate")

    def __init__(self, n: int, rate: _Walk) -> None:
        self.n, self.rate = n, rate

    def step(self, rnd: Callable[[], float], dt: float) -> int:
        self.n += int(self.rate.step(rnd) * dt)
        return self.n


_Series = Callable[[float], str]  # seconds since this series last reported -> "measurement,tags fields"


def _metric_series(pool: random.Random, rnd: Callable[[], float], host: str, region: str, role: str,
                   cpus: int, mem_gb: int) -> list[_Series]:
    def series_key(measurement: str, **extra: str) -> str:
        # Telegraf writes tags sorted by key.
        tags = {"host": host, "region": region, **extra}
        return measurement + "".join(f",{k}={tags[k]}" for k in sorted(tags))

    load = {"web": 18.0, "api": 32.0, "db": 24.0, "k8s-node": 45.0, "worker": 55.0}[role]
    out: list[_Series] = []

    def cpu(name: str) -> _Series:
        user = _Walk(load * pool.uniform(0.6, 1.1), load * pool.uniform(0.6, 1.1), 1.8, 0.0, 95.0)
        system = _Walk(load * 0.2, load * 0.2, 0.5, 0.0, 40.0)
        iowait = _Walk(0.6, 0.6 if role != "db" else 3.0, 0.3, 0.0, 30.0)
        softirq = _Walk(0.4, 0.4, 0.1, 0.0, 5.0)
        steal = _Walk(0.1, 0.1, 0.05, 0.0, 3.0)
        prefix = series_key("cpu", cpu=name) + " "

        def render(dt: float) -> str:
            us, sy, io, si, st = user.step(rnd), system.step(rnd), iowait.step(rnd), softirq.step(rnd), steal.step(rnd)
            idle = max(0.0, 100.0 - us - sy - io - si - st)
            return (f"{prefix}usage_guest=0,usage_guest_nice=0,usage_idle={_gfmt(idle)},usage_iowait={_gfmt(io)},"
                    f"usage_irq=0,usage_nice=0,usage_softirq={_gfmt(si)},usage_steal={_gfmt(st)},"
                    f"usage_system={_gfmt(sy)},usage_user={_gfmt(us)}")
        return render

    out.append(cpu("cpu-total"))
    out += [cpu(f"cpu{i}") for i in range(cpus)]

    total = mem_gb * 1024 ** 3
    used = _Walk(total * pool.uniform(0.3, 0.7), total * pool.uniform(0.3, 0.7), total * 0.004, total * 0.1, total * 0.92)
    cached = _Walk(total * 0.2, total * 0.2, total * 0.002, total * 0.02, total * 0.5)

    mem_key = series_key("mem")

    def mem(dt: float) -> str:
        u, c = int(used.step(rnd)), int(cached.step(rnd))
        buffered = int(total * 0.012)
        free = max(0, total - u - c - buffered)
        available = free + int(c * 0.85) + buffered
        return (f"{mem_key} active={int(u * 0.8)}i,available={available}i,available_percent={_gfmt(available * 100 / total)},"
                f"buffered={buffered}i,cached={c}i,free={free}i,inactive={int(c * 0.6)}i,total={total}i,used={u}i,"
                f"used_percent={_gfmt(u * 100 / total)}")
    out.append(mem)

    def disk(path: str, device: str, size_gb: int) -> _Series:
        dtotal = size_gb * 1_000_000_000
        dused = _Walk(dtotal * pool.uniform(0.2, 0.7), dtotal * 0.6, dtotal * 0.00002, dtotal * 0.05, dtotal * 0.98, 0.0005)
        inodes_total = size_gb * 65_536
        prefix = series_key("disk", device=device, fstype="ext4", mode="rw", path=path) + " "

        def render(dt: float) -> str:
            u = int(dused.step(rnd))
            free = dtotal - u
            iu = int(u / 40_000)
            return (f"{prefix}free={free}i,inodes_free={inodes_total - iu}i,inodes_total={inodes_total}i,inodes_used={iu}i,"
                    f"total={dtotal}i,used={u}i,used_percent={_gfmt(u * 100 / dtotal)}")
        return render

    out.append(disk("/", "nvme0n1p1", 100))
    if role == "db":
        out.append(disk("/var/lib/postgresql", "nvme1n1", 1000))
    elif role == "k8s-node":
        out.append(disk("/var/lib/containerd", "nvme1n1", 200))

    def counter(rate: float, start: float) -> _Counter:
        return _Counter(int(start * pool.uniform(0.5, 1.5)), _Walk(rate, rate, rate * 0.05, 0.0, rate * 5))

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
    out.append(diskio)

    net_scale = {"web": 4.0, "api": 3.0, "db": 2.0, "k8s-node": 5.0, "worker": 0.5}[role]
    brecv, bsent = counter(2.2e6 * net_scale, 4e12), counter(4.8e6 * net_scale, 9e12)
    precv, psent = counter(2600 * net_scale, 6e9), counter(2900 * net_scale, 7e9)
    drops = counter(0.01, 2000)

    net_key = series_key("net", interface="ens5")

    def net(dt: float) -> str:
        return (f"{net_key} bytes_recv={brecv.step(rnd, dt)}i,bytes_sent={bsent.step(rnd, dt)}i,"
                f"drop_in={drops.step(rnd, dt)}i,drop_out=0i,err_in=0i,err_out=0i,packets_recv={precv.step(rnd, dt)}i,"
                f"packets_sent={psent.step(rnd, dt)}i")
    out.append(net)

    l1 = _Walk(cpus * load / 100, cpus * load / 100, 0.08 * cpus, 0.0, cpus * 4.0, 0.1)
    l5 = _Walk(l1.v, l1.v, 0.03 * cpus, 0.0, cpus * 4.0, 0.1)
    l15 = _Walk(l1.v, l1.v, 0.01 * cpus, 0.0, cpus * 4.0, 0.1)
    uptime0 = pool.randrange(3 * 86_400, 200 * 86_400)
    elapsed = [0.0]
    users = pool.randrange(0, 3)

    system_key = series_key("system")

    def system(dt: float) -> str:
        elapsed[0] += dt
        return (f"{system_key} load1={_gfmt(round(l1.step(rnd), 2))},load15={_gfmt(round(l15.step(rnd), 2))},"
                f"load5={_gfmt(round(l5.step(rnd), 2))},n_cpus={cpus}i,n_unique_users={users}i,n_users={users}i,"
                f"uptime={uptime0 + int(elapsed[0])}i")
    out.append(system)

    sleeping = _Walk(280.0, 280.0, 3.0, 150.0, 600.0)
    threads = _Walk(900.0, 900.0, 8.0, 400.0, 3000.0)

    processes_key = series_key("processes")

    def processes(dt: float) -> str:
        running, s = int(rnd() * 4), int(sleeping.step(rnd))
        idle = 80 + cpus * 2
        return (f"{processes_key} blocked=0i,dead=0i,idle={idle}i,paging=0i,running={running}i,sleeping={s}i,"
                f"stopped=0i,total={running + s + idle}i,total_threads={int(threads.step(rnd))}i,unknown=0i,zombies=0i")
    out.append(processes)

    service = {"web": "storefront", "api": "orders-api", "k8s-node": "ingress"}.get(role)
    if service:
        for method, status, share in (("GET", 200, 1.0), ("GET", 304, 0.08), ("POST", 201, 0.1), ("GET", 404, 0.03),
                                      ("POST", 400, 0.01), ("GET", 500, 0.004)):
            count = counter(180 * share, 4e8 * share)
            p50 = _Walk(18.0, 18.0, 0.6, 2.0, 200.0)
            p95 = _Walk(85.0, 85.0, 3.0, 20.0, 900.0)
            p99 = _Walk(240.0, 240.0, 9.0, 50.0, 3000.0)

            def http(dt: float, count: _Counter = count, p50: _Walk = p50, p95: _Walk = p95, p99: _Walk = p99,
                     prefix: str = series_key("http_requests", method=method, service=service, status=str(status)) + " ",
                     ) -> str:
                return (f"{prefix}count={count.step(rnd, dt)}i,duration_p50_ms={_gfmt(round(p50.step(rnd), 3))},"
                        f"duration_p95_ms={_gfmt(round(p95.step(rnd), 3))},duration_p99_ms={_gfmt(round(p99.step(rnd), 3))}")
            out.append(http)
    return out


def _gen_metrics(ctx: _Ctx) -> Iterator[Record]:
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    layout = (("web", 6, 4, 8), ("api", 6, 8, 16), ("db", 3, 16, 64), ("k8s-node", 6, 8, 32), ("worker", 3, 4, 8))
    hosts: list[tuple[str, bytes, list[_Series], list[float]]] = []
    for role, count, cpus, mem_gb in layout:
        for i in range(1, count + 1):
            name = f"{role}-{i:02d}"
            region = "us-east-1" if i % 3 == 0 else "eu-west-1"
            series = _metric_series(pool, rnd, name, region, role, cpus, mem_gb)
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


# --------------------------------------------------------------------------------------------
# entities: keyed JSON upserts and tombstones for compacted topics

_ENTITY_COUNT = 50_000
_TOMBSTONE_SHARE = 0.04

# (country, weight, locale, currency, cities, first names, last names, email domains)
_COUNTRIES: tuple[tuple[str, float, str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("US", 30, "en-US", "USD", ("New York", "Los Angeles", "Chicago", "Houston", "Phoenix", "Seattle", "Austin", "Denver", "Boston", "Miami"),
     ("James", "Mary", "Michael", "Jennifer", "David", "Linda", "Robert", "Emily", "John", "Jessica", "Daniel", "Ashley", "Chris", "Sarah", "Matthew", "Olivia"),
     ("Smith", "Johnson", "Williams", "Brown", "Jones", "Miller", "Davis", "Wilson", "Anderson", "Taylor", "Thomas", "Moore", "Martin", "Jackson", "Lee", "Harris"),
     ("gmail.com", "yahoo.com", "outlook.com", "icloud.com", "hotmail.com", "aol.com")),
    ("DE", 14, "de-DE", "EUR", ("Berlin", "Hamburg", "München", "Köln", "Frankfurt am Main", "Stuttgart", "Düsseldorf", "Leipzig"),
     ("Lukas", "Anna", "Jürgen", "Sophie", "Maximilian", "Lea", "Jörg", "Marie", "Felix", "Hannah", "Jonas", "Mia"),
     ("Müller", "Schmidt", "Schneider", "Fischer", "Weber", "Meyer", "Wagner", "Becker", "Schäfer", "Koch", "Hoffmann", "Schulz"),
     ("gmail.com", "web.de", "gmx.de", "t-online.de", "outlook.de", "posteo.de")),
    ("GB", 11, "en-GB", "GBP", ("London", "Manchester", "Birmingham", "Leeds", "Glasgow", "Bristol", "Edinburgh"),
     ("Oliver", "Amelia", "George", "Isla", "Harry", "Ava", "Jack", "Emily", "Charlie", "Sophie", "Noah", "Grace"),
     ("Smith", "Jones", "Taylor", "Brown", "Williams", "Wilson", "Evans", "Thomas", "Roberts", "Walker", "Wright", "Hughes"),
     ("gmail.com", "hotmail.co.uk", "outlook.com", "btinternet.com", "icloud.com", "yahoo.co.uk")),
    ("FR", 9, "fr-FR", "EUR", ("Paris", "Marseille", "Lyon", "Toulouse", "Nice", "Nantes", "Bordeaux", "Lille"),
     ("Hélène", "Lucas", "Chloé", "Hugo", "Léa", "Louis", "Camille", "Théo", "Manon", "Gabriel", "Inès", "Jules"),
     ("Martin", "Bernard", "Dubois", "Thomas", "Robert", "Richard", "Petit", "Durand", "Lefèvre", "Moreau", "Laurent", "Girard"),
     ("gmail.com", "orange.fr", "free.fr", "hotmail.fr", "laposte.net", "sfr.fr")),
    ("ES", 7, "es-ES", "EUR", ("Madrid", "Barcelona", "Valencia", "Sevilla", "Zaragoza", "Málaga", "Bilbao"),
     ("José", "María", "Javier", "Lucía", "Alejandro", "Carmen", "Sofía", "Pablo", "Ángel", "Marta", "Álvaro", "Elena"),
     ("García", "Fernández", "González", "Rodríguez", "López", "Martínez", "Sánchez", "Pérez", "Gómez", "Muñoz", "Díaz", "Romero"),
     ("gmail.com", "hotmail.es", "yahoo.es", "outlook.es", "telefonica.net")),
    ("BR", 7, "pt-BR", "BRL", ("São Paulo", "Rio de Janeiro", "Belo Horizonte", "Brasília", "Salvador", "Curitiba", "Porto Alegre"),
     ("João", "Maria", "Pedro", "Ana", "Lucas", "Juliana", "Gabriel", "Beatriz", "Rafael", "Larissa", "Mateus", "Camila"),
     ("Silva", "Santos", "Oliveira", "Souza", "Rodrigues", "Ferreira", "Alves", "Pereira", "Lima", "Conceição", "Gomes", "Ribeiro"),
     ("gmail.com", "hotmail.com", "outlook.com", "yahoo.com.br", "uol.com.br", "bol.com.br")),
    ("IN", 6, "en-IN", "INR", ("Mumbai", "Delhi", "Bengaluru", "Hyderabad", "Chennai", "Pune", "Kolkata"),
     ("Aarav", "Priya", "Rohan", "Ananya", "Vikram", "Sneha", "Arjun", "Kavya", "Rahul", "Neha", "Aditya", "Isha"),
     ("Sharma", "Patel", "Singh", "Kumar", "Gupta", "Reddy", "Iyer", "Nair", "Mehta", "Das", "Joshi", "Rao"),
     ("gmail.com", "yahoo.co.in", "rediffmail.com", "outlook.com")),
    ("PL", 5, "pl-PL", "PLN", ("Warszawa", "Kraków", "Łódź", "Wrocław", "Poznań", "Gdańsk"),
     ("Łukasz", "Anna", "Piotr", "Katarzyna", "Krzysztof", "Agnieszka", "Tomasz", "Małgorzata", "Paweł", "Zofia"),
     ("Nowak", "Kowalski", "Wiśniewski", "Wójcik", "Kowalczyk", "Kamiński", "Lewandowski", "Zieliński"),
     ("gmail.com", "wp.pl", "onet.pl", "o2.pl", "interia.pl")),
    ("NL", 5, "nl-NL", "EUR", ("Amsterdam", "Rotterdam", "Den Haag", "Utrecht", "Eindhoven", "Groningen"),
     ("Daan", "Emma", "Sem", "Julia", "Lucas", "Tess", "Finn", "Sanne", "Bram", "Fleur"),
     ("de Jong", "Jansen", "de Vries", "van den Berg", "Bakker", "Visser", "Smit", "Meijer", "de Boer", "Mulder"),
     ("gmail.com", "hotmail.nl", "ziggo.nl", "kpnmail.nl", "outlook.com")),
    ("JP", 4, "ja-JP", "JPY", ("Tokyo", "Osaka", "Yokohama", "Nagoya", "Sapporo", "Fukuoka"),
     ("Haruto", "Yui", "Sota", "Hina", "Ren", "Aoi", "Yuto", "Sakura", "Riku", "Mei"),
     ("Sato", "Suzuki", "Takahashi", "Tanaka", "Watanabe", "Ito", "Yamamoto", "Nakamura", "Kobayashi", "Kato"),
     ("gmail.com", "yahoo.co.jp", "docomo.ne.jp", "icloud.com")),
)
_PLANS = (("free", 55), ("starter", 20), ("pro", 18), ("business", 6), ("enterprise", 1))
_ENTITY_TAGS = ("newsletter", "beta", "mobile", "vip", "early-adopter", "referral", "b2b", "churn-risk",
                "black-friday-2025", "support-priority", "gift-card", "loyalty-gold")
_FOLD = str.maketrans({"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "ß": "ss", "æ": "ae"})


def _ascii_fold(s: str) -> str:
    decomposed = unicodedata.normalize("NFKD", s.translate(_FOLD))
    return "".join(c for c in decomposed if c.isascii() and c.isalnum())


def _gen_entities(ctx: _Ctx) -> Iterator[Record]:
    pool, rng, clock, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.headers
    rnd = rng.random
    n = _ENTITY_COUNT
    # A cheap fixed permutation (multiplier coprime with n) so the hot ids are scattered.
    stride, offset = 7919, pool.randrange(n)
    ranks = _Dist([((r * stride + offset) % n) for r in range(n)], _zipf_weights(n, 1.0))
    countries = _Dist(_COUNTRIES, [c[1] for c in _COUNTRIES])
    plans = _weighted(_PLANS)
    tag_dist = _zipf(range(len(_ENTITY_TAGS)), 1.0)
    ids = [f"user-{i + 1:06d}" for i in range(n)]
    # Per entity while it exists: [version, JSON prefix of stable fields, status, balance, logins, tags JSON]
    live: list[list | None] = [None] * n
    sources = [f"users-api-6c9f7b8d4-{_pod_suffix(pool)}" for _ in range(3)]
    encode = _JSON.encode
    now_text = _SecondText(_fmt_iso)

    def create(i: int, iso: str) -> list:
        country, _, locale, currency, cities, firsts, lasts, domains = countries.pick(rnd)
        first, last = firsts[int(rnd() * len(firsts))], lasts[int(rnd() * len(lasts))]
        f, l = _ascii_fold(first).lower(), _ascii_fold(last).lower()
        style = rnd()
        local = (f"{f}.{l}" if style < 0.35 else f"{f}{l}{int(rnd() * 99)}" if style < 0.6 else
                 f"{f[0]}{l}" if style < 0.75 else f"{f}_{l}{1960 + int(rnd() * 46)}" if style < 0.9 else f"{l}.{f}")
        domain = domains[min(int(len(domains) * rnd() * rnd() * 1.6), len(domains) - 1)]
        stable = encode({
            "id": ids[i], "name": f"{first} {last}", "email": f"{local}@{domain}", "country": country,
            "city": cities[int(rnd() * rnd() * len(cities))], "locale": locale, "currency": currency,
            "plan": plans.pick(rnd), "created_at": iso,
        })[:-1]
        tags = sorted({tag_dist.pick(rnd) for _ in range(int(rnd() * 3))})
        status = "pending" if rnd() < 0.3 else "active"
        return [0, stable, status, 0.0, 0, encode([_ENTITY_TAGS[t] for t in tags]), tags]

    def update(e: list) -> None:
        status = e[2]
        r = rnd()
        if status == "pending":
            e[2] = "active" if r < 0.6 else status
        elif status == "active":
            e[2] = "past_due" if r < 0.01 else "suspended" if r < 0.014 else status
        elif r < 0.3:
            e[2] = "active"
        if rnd() < 0.5:
            e[3] = max(0.0, round(e[3] + (rnd() - 0.35) * 120.0, 2))
        if rnd() < 0.6:
            e[4] += 1
        if rnd() < 0.05:
            tags: list[int] = e[6]
            t = tag_dist.pick(rnd)
            if t in tags:
                tags.remove(t)
            else:
                tags.append(t)
                tags.sort()
            e[5] = encode([_ENTITY_TAGS[x] for x in tags])

    while True:
        times = clock.block()
        for t, i in zip(times, ranks.block(rng)):
            ms = int(t)
            iso = f"{now_text(ms // 1000)}.{ms % 1000:03d}Z"
            if rnd() < _TOMBSTONE_SHARE:
                # Delete something that exists: hot entities are alive, so a few draws suffice.
                for _ in range(16):
                    if live[i] is not None:
                        break
                    i = ranks.pick(rnd)
                if live[i] is not None:
                    live[i] = None
                    yield Record(ids[i].encode(), None,
                                 hdr.make(hdr.choose(sources), trace=True, content=False)
                                 if hdr is not None else (), ms)
                    continue
            e = live[i]
            if e is None:
                e = live[i] = create(i, iso)
            else:
                update(e)
            e[0] += 1
            value = (f'{e[1]},"updated_at":"{iso}","version":{e[0]},"status":"{e[2]}","balance":{e[3]:.2f},'
                     f'"login_count":{e[4]},"tags":{e[5]}}}').encode()
            yield Record(ids[i].encode(), value,
                         hdr.make(hdr.choose(sources), trace=True) if hdr is not None else (), ms)


_GENERATORS: dict[str, Callable[[_Ctx], Iterator[Record]]] = {
    "nginx": _gen_nginx,
    "nginx-error": _gen_nginx_error,
    "json-logs": _gen_json_logs,
    "dns": _gen_dns,
    "metrics": _gen_metrics,
    "entities": _gen_entities,
}
