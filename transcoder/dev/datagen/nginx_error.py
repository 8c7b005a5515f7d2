"""nginx-error: nginx's error.log (upstream failures, missing files, rate limits, TLS noise), keyed by server name."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

from transcoder.dev.datagen.draws import Distribution, skewed_int, zipf
from transcoder.dev.datagen.identifiers import public_ipv4
from transcoder.dev.datagen.shop import CATEGORIES, ORIGIN, SITE
from transcoder.dev.datagen.stream import Record, StreamContext
from transcoder.dev.datagen.timetext import PerSecondText, slashed_time

Rnd = Callable[[], float]
Message = tuple[str, str | None]  # (message, server name or None when the line has no request context)

_WWW, _API, _STATIC, _ADMIN = SITE, "api.example-shop.com", "static.example-shop.com", "admin.example-shop.com"
_UPSTREAMS = [f"10.0.3.{n}:8080" for n in (11, 12, 13, 14, 21, 22)]
_MISSING = zipf([
    "/favicon.ico", "/apple-touch-icon.png", "/apple-touch-icon-precomposed.png", "/wp-login.php", "/.env",
    "/ads.txt", "/xmlrpc.php", "/.well-known/security.txt", "/.git/config", "/sitemap_index.xml",
    "/static/js/main.4f8c2a1e.js.map", "/static/js/vendor.9b3d7e20.js.map", "/wp-content/plugins/wp-file-manager/readme.txt",
    "/phpmyadmin/index.php", "/admin/.env", "/config.json", "/.aws/credentials", "/server-status",
    "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php", "/images/products/0/thumb.webp",
    "/.well-known/traffic-advice", "/app-ads.txt", "/browserconfig.xml", "/humans.txt",
], 1.0)
_API_PATHS = zipf([
    "/api/v1/products", "/api/v1/search", "/api/v1/cart", "/api/v1/orders", "/api/v1/users/me",
    "/api/v1/auth/refresh", "/api/v1/auth/login", "/api/v1/recommendations", "/api/v1/inventory/sync",
    "/api/v1/reports/export", "/api/v1/uploads",
], 1.0)
_SSL_ERRORS = zipf([
    "SSL_do_handshake() failed (SSL: error:0A00006C:SSL routines::bad key share) while SSL handshaking",
    "SSL_do_handshake() failed (SSL: error:0A000102:SSL routines::unsupported protocol) while SSL handshaking",
    "SSL_do_handshake() failed (SSL: error:0A0000C1:SSL routines::no shared cipher) while SSL handshaking",
    "SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong version number) while SSL handshaking",
    "SSL_read() failed (SSL: error:0A000126:SSL routines::unexpected eof while reading) while keepalive",
    "SSL_do_handshake() failed (SSL: error:0A000076:SSL routines::no suitable signature algorithm) while SSL handshaking",
], 1.2)
_REFERERS = zipf([f"{ORIGIN}/", f"{ORIGIN}/cart", f"{ORIGIN}/checkout", f"{ORIGIN}/products/1042/classic-leather-sneaker",
                  f"{ORIGIN}/category/shoes"], 1.0)
_NOTICES = zipf(["signal process started", "signal 1 (SIGHUP) received from {pid}, reconfiguring",
                 "reconfiguring", 'using the "epoll" event method', "start worker processes",
                 "start worker process {pid}", "gracefully shutting down", "exiting", "exit",
                 "worker process {pid} exited with code 0"], 0.8)


def _machines(pool: random.Random) -> Distribution[tuple[str, int, list[list[int]]]]:
    """Four web servers: (host, master pid, workers as [pid, connection number])."""
    machines = []
    for i in range(1, 5):
        master = pool.randrange(700, 1500)
        first = master + pool.randrange(1, 40)
        workers = [[first + w, pool.randrange(10_000, 3_000_000)] for w in range(4)]
        machines.append((f"web-{i:02d}", master, workers))
    return Distribution(machines, [4.0, 3.0, 2.0, 1.5])


class _ErrorMessages:
    """The error messages, one method per template; each draws with the uniform source `r` it is given."""

    __slots__ = ("_clients", "_scanners")

    def __init__(self, pool: random.Random) -> None:
        self._clients = zipf([public_ipv4(pool) for _ in range(1500)], 1.0)
        self._scanners = zipf([public_ipv4(pool) for _ in range(300)], 0.9)

    @staticmethod
    def _api_request(r: Rnd) -> tuple[str, str]:
        path = _API_PATHS.pick(r)
        method = "POST" if path in ("/api/v1/orders", "/api/v1/auth/login", "/api/v1/auth/refresh",
                                    "/api/v1/uploads", "/api/v1/cart") and r() < 0.7 else "GET"
        if path == "/api/v1/products" and r() < 0.6:
            path = f"{path}/{skewed_int(r, 60_000)}"
        return method, path

    def _upstream_tail(self, r: Rnd, server: str, method: str, path: str, up: str) -> str:
        return (f', client: {self._clients.pick(r)}, server: {server}, request: "{method} {path} HTTP/1.1", '
                f'upstream: "http://{up}{path}", host: "{server}"')

    def _upstream_failure(self, r: Rnd, text: str) -> Message:
        method, path = self._api_request(r)
        return text + self._upstream_tail(r, _API, method, path, _UPSTREAMS[int(r() * len(_UPSTREAMS))]), _API

    def upstream(self, text: str) -> Callable[[Rnd], Message]:
        """A template for an upstream failure described by `text`."""
        return lambda r: self._upstream_failure(r, text)

    def open_failed(self, r: Rnd) -> Message:
        path = _MISSING.pick(r)
        scanner = path.startswith(("/.", "/wp", "/xml", "/php", "/admin", "/vendor", "/server", "/config"))
        ip = self._scanners.pick(r) if scanner else self._clients.pick(r)
        host = ip if scanner and r() < 0.5 else _WWW
        tail = f', referrer: "{_REFERERS.pick(r)}"' if not scanner and r() < 0.4 else ""
        return (f'open() "/usr/share/nginx/html{path}" failed (2: No such file or directory), client: {ip}, '
                f'server: {_WWW}, request: "GET {path} HTTP/1.1", host: "{host}"{tail}'), _WWW

    def no_live(self, r: Rnd) -> Message:
        method, path = self._api_request(r)
        return ("no live upstreams while connecting to upstream"
                + self._upstream_tail(r, _API, method, path, "orders_backend")), _API

    def limiting(self, r: Rnd) -> Message:
        method, path = self._api_request(r)
        return (f'limiting requests, excess: {r() * 40:.3f} by zone "api_limit", client: {self._clients.pick(r)}, '
                f'server: {_API}, request: "{method} {path} HTTP/1.1", host: "{_API}"'), _API

    def delaying(self, r: Rnd) -> Message:
        method, path = self._api_request(r)
        return (f'delaying request, excess: {r() * 10:.3f}, by zone "api_limit", client: {self._clients.pick(r)}, '
                f'server: {_API}, request: "{method} {path} HTTP/1.1", host: "{_API}"'), _API

    def too_large(self, r: Rnd) -> Message:
        size = int(10_485_760 * (1.0 + 9.0 * r() * r()))
        return (f"client intended to send too large body: {size} bytes, client: {self._clients.pick(r)}, "
                f'server: {_API}, request: "POST /api/v1/uploads HTTP/1.1", host: "{_API}"'), _API

    def response_buffered(self, r: Rnd) -> Message:
        n = int(r() * 9_999_999_999)
        method = "GET"
        path = "/api/v1/reports/export" if r() < 0.6 else f"/api/v1/products?category={CATEGORIES[int(r() * 20)]}"
        return (f"an upstream response is buffered to a temporary file /var/cache/nginx/proxy_temp/{n % 10}/"
                f"{(n // 10) % 100:02d}/{n:010d} while reading upstream"
                + self._upstream_tail(r, _API, method, path, _UPSTREAMS[int(r() * len(_UPSTREAMS))])), _API

    def body_buffered(self, r: Rnd) -> Message:
        return (f"a client request body is buffered to a temporary file /var/cache/nginx/client_temp/"
                f"{int(r() * 9_999_999_999):010d}, client: {self._clients.pick(r)}, server: {_API}, "
                f'request: "POST /api/v1/uploads HTTP/1.1", host: "{_API}"'), _API

    def ssl(self, r: Rnd) -> Message:
        ip = self._scanners.pick(r) if r() < 0.6 else self._clients.pick(r)
        return f"{_SSL_ERRORS.pick(r)}, client: {ip}, server: 0.0.0.0:443", "0.0.0.0:443"

    def forbidden(self, r: Rnd) -> Message:
        path = "/admin/" if r() < 0.5 else "/admin/login"
        return (f'access forbidden by rule, client: {self._scanners.pick(r)}, server: {_ADMIN}, '
                f'request: "GET {path} HTTP/1.1", host: "{_ADMIN}"'), _ADMIN

    def dir_index(self, r: Rnd) -> Message:
        d = "/static/" if r() < 0.5 else "/static/js/"
        return (f'directory index of "/usr/share/nginx/html{d}" is forbidden, client: {self._scanners.pick(r)}, '
                f'server: {_STATIC}, request: "GET {d} HTTP/1.1", host: "{_STATIC}"'), _STATIC


def _templates(m: _ErrorMessages) -> Distribution[tuple[str, Callable[[Rnd], Message] | None, bool]]:
    """(level, template or None for a notice of the master process, has a connection number), weighted."""
    return Distribution([
        ("error", m.open_failed, True),
        ("error", m.upstream("upstream timed out (110: Connection timed out) while reading response header from upstream"), True),
        ("error", m.upstream("connect() failed (111: Connection refused) while connecting to upstream"), True),
        ("error", m.upstream("recv() failed (104: Connection reset by peer) while reading response header from upstream"), True),
        ("error", m.upstream("upstream prematurely closed connection while reading response header from upstream"), True),
        ("error", m.upstream("upstream sent too big header while reading response header from upstream"), True),
        ("error", m.no_live, True),
        ("error", m.limiting, True),
        ("warn", m.delaying, True),
        ("error", m.too_large, True),
        ("warn", m.response_buffered, True),
        ("warn", m.body_buffered, True),
        ("crit", m.ssl, True),
        ("error", m.forbidden, True),
        ("error", m.dir_index, True),
        ("warn", m.upstream("upstream server temporarily disabled while connecting to upstream"), True),
        ("alert", m.upstream("4096 worker_connections are not enough while connecting to upstream"), True),
        ("notice", None, False),
    ], [30, 14, 8, 5, 4, 1.5, 2, 6, 5, 3, 6, 2, 5, 2, 1.5, 2, 0.3, 1.2])


def generate_nginx_error(ctx: StreamContext) -> Iterator[Record]:
    """error.log lines of four web servers; keyed by the server (vhost) a line concerns, else by host."""
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    machine_dist = _machines(pool)
    templates = _templates(_ErrorMessages(pool))
    notices = _NOTICES
    now_text = PerSecondText(slashed_time)

    while True:
        times = clock.block()
        for t, (host, master, workers), (level, template, has_conn) in zip(
                times, machine_dist.block(rng), templates.block(rng), strict=False):
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
