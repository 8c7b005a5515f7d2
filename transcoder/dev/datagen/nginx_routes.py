"""The nginx access log's routes: what is requested, how, with which status, size, latency and referer."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NamedTuple

from transcoder.dev.datagen.draws import (
    Distribution,
    lookup_table,
    skewed_int,
    weighted,
    zipf,
    zipf_weights,
)
from transcoder.dev.datagen.shop import CATEGORIES, ORIGIN, SEARCH_TERMS, product_slug

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

PathMaker = Callable[[Callable[[], float]], str]  # a path, drawn with the uniform [0, 1) source it is given


class Route(NamedTuple):
    """One kind of request; its draws in the nginx loop use lookup tables of TABLE_SIZE slots."""

    method: str | None  # fixed method, else drawn from methods
    methods: list[str] | None
    path: str | None  # fixed path, else built by path_fn
    path_fn: PathMaker | None
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

# Status and method mixes, shared by several routes.
_STATIC_STATUSES = weighted([(200, 78), (304, 21), (404, 0.6), (499, 0.4)])
_PAGE_STATUSES = weighted([(200, 90), (304, 3), (301, 1.5), (302, 1.0), (404, 2.5), (499, 0.8), (500, 0.4), (502, 0.4),
                           (503, 0.2), (504, 0.2)])
_API_READ_STATUSES = weighted([(200, 92), (304, 1.2), (400, 0.5), (401, 1.6), (403, 0.3), (404, 2.6), (429, 0.4),
                               (499, 0.6), (500, 0.4), (502, 0.2), (503, 0.1), (504, 0.1)])
_API_WRITE_STATUSES = weighted([(200, 60), (201, 24), (204, 4), (400, 3), (401, 1.5), (409, 1.5), (422, 2.5), (429, 0.8),
                                (500, 1.2), (502, 0.3), (504, 0.2)])
_LOGIN_STATUSES = weighted([(200, 80), (401, 16), (429, 2.5), (500, 0.5)])
_SCAN_STATUSES = weighted([(404, 94), (403, 5), (301, 1)])
_HEALTH_STATUSES = weighted([(200, 999), (503, 1)])
_REDIRECT_STATUSES = weighted([(301, 96), (404, 4)])
_GET_OR_HEAD = weighted([("GET", 96), ("HEAD", 4)])
_USER_METHODS = weighted([("GET", 86), ("PUT", 6), ("PATCH", 5), ("DELETE", 1), ("OPTIONS", 2)])
_CART_METHODS = weighted([("GET", 55), ("POST", 35), ("OPTIONS", 10)])
_CART_ITEM_METHODS = weighted([("POST", 55), ("DELETE", 30), ("PATCH", 15)])
_SCAN_METHODS = weighted([("GET", 85), ("POST", 15)])

# What the built paths are made of.
_PAGE_NUMBERS = zipf(list(range(1, 31)), 1.3)
_CATEGORY_MIX = zipf(CATEGORIES, 0.9)
_SEARCH_MIX = zipf(SEARCH_TERMS, 1.0)
_SORT_ORDERS = weighted([("relevance", 60), ("price_asc", 15), ("price_desc", 8), ("newest", 17)])
_UTM_MIX = weighted([(u, 92.0 if not u else 1.6) for u in _UTM])
_BLOG_MIX = zipf(_BLOG_SLUGS, 1.1)
_IMAGE_VARIANTS = weighted([("thumb", 55), ("medium", 30), ("large", 15)])
_SCAN_PATHS = zipf(["/wp-login.php", "/.env", "/xmlrpc.php", "/.git/config", "/wp-admin/setup-config.php",
                    "/phpmyadmin/index.php", "/admin/.env", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
                    "/.aws/credentials", "/server-status", "/cgi-bin/luci/;stok=/locale", "/actuator/env",
                    "/boaform/admin/formLogin", "/owa/auth/logon.aspx", "/.DS_Store", "/config.json"], 1.0)


def nginx_routes(pool: random.Random) -> Distribution[Route]:
    """Every route with its share of the traffic; `pool` draws the products that referers name.

    The order of the routes is part of the output: the draws index into it.
    """
    ref_internal, ref_mixed = _referers(pool)
    route = _RouteBuilder()
    return weighted(_static_routes(route, ref_internal, ref_mixed) + _api_routes(route, ref_internal)
                    + _page_routes(route, ref_internal, ref_mixed) + _special_routes(route, ref_internal))


def _referers(pool: random.Random) -> tuple[Distribution[str], Distribution[str]]:
    """(referers from the shop's own pages, those mixed with search engines and social sites)."""
    internal = [f"{ORIGIN}/", f"{ORIGIN}/cart", f"{ORIGIN}/checkout", f"{ORIGIN}/account", f"{ORIGIN}/login"]
    internal += [f"{ORIGIN}/category/{c}" for c in CATEGORIES[:10]]
    for _ in range(16):
        pid = skewed_int(pool.random, 60_000)
        internal.append(f"{ORIGIN}/products/{pid}/{product_slug(pid)}")
    internal += [f"{ORIGIN}/search?q={t}" for t in SEARCH_TERMS[:6]]
    pool.shuffle(internal)
    ref_internal = zipf(internal, 1.0)
    mixed = [(r, w * 0.6) for r, w in zip(internal, zipf_weights(len(internal)), strict=True)]
    mixed += [(r, w * 0.4 * 3.0) for r, w in zip(_EXTERNAL_REFERERS, zipf_weights(len(_EXTERNAL_REFERERS), 1.4), strict=True)]
    return ref_internal, weighted(mixed)


class _RouteBuilder:
    """Makes (Route, weight) pairs, turning each distribution into a lookup table once."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        # Routes share distributions; build each lookup table once.  The cache holds on to each
        # distribution too: a collected one's id() could be reused by the next inline weighted().
        self._tables: dict[int, tuple[Distribution, list]] = {}

    def _table(self, dist: Distribution) -> list:
        if id(dist) not in self._tables:
            self._tables[id(dist)] = (dist, lookup_table(dist))
        return self._tables[id(dist)][1]

    def __call__(self, weight: float, path: str | PathMaker, method: str | Distribution[str],
                 statuses: Distribution[int], median: float, sigma: float, rt: float,
                 referers: Distribution[str] | None, p_noref: float, *, api: bool = False,
                 client: str = "pool") -> tuple[Route, float]:
        return Route(
            method=method if isinstance(method, str) else None,
            methods=None if isinstance(method, str) else self._table(method),
            path=path if isinstance(path, str) else None,
            path_fn=None if isinstance(path, str) else path,
            statuses=self._table(statuses), sizes=_API_ERROR_BODIES if api else _NGINX_DEFAULT_BODIES,
            size_median=median, size_sigma=sigma, rt_median=rt,
            referers=None if referers is None else self._table(referers), p_no_referer=p_noref, client=client,
        ), weight


def _static_routes(route: _RouteBuilder, ref_internal: Distribution[str],
                   ref_mixed: Distribution[str]) -> list[tuple[Route, float]]:
    """Built assets, the home page and the files browsers and crawlers fetch by themselves."""
    routes = [route(w, p, _GET_OR_HEAD, _STATIC_STATUSES, size, 0.0, 0.0006, ref_internal, 0.08)
              for p, size, w in _STATIC_ASSETS]
    return [*routes,
            route(7.0, "/", _GET_OR_HEAD, _PAGE_STATUSES, 38_000, 0.08, 0.025, ref_mixed, 0.45),
            route(2.5, "/favicon.ico", "GET", _STATIC_STATUSES, 15_086, 0.0, 0.0004, ref_internal, 0.3),
            route(0.8, "/robots.txt", "GET", _STATIC_STATUSES, 412, 0.0, 0.0003, None, 1.0),
            route(0.3, "/sitemap.xml", "GET", _STATIC_STATUSES, 284_113, 0.0, 0.004, None, 1.0),
            route(0.6, "/apple-touch-icon.png", "GET", weighted([(404, 70), (200, 30)]), 7_823, 0.0, 0.0003, None, 1.0)]


def _api_routes(route: _RouteBuilder, ref_internal: Distribution[str]) -> list[tuple[Route, float]]:
    """The JSON API the shop's pages and apps call."""
    pages, cats, terms, sorts = _PAGE_NUMBERS, _CATEGORY_MIX, _SEARCH_MIX, _SORT_ORDERS
    reads, writes = _API_READ_STATUSES, _API_WRITE_STATUSES
    return [
        route(9.0, lambda r: f"/api/v1/products/{skewed_int(r, 60_000)}", _GET_OR_HEAD, reads, 2_400, 0.45, 0.018,
              ref_internal, 0.3, api=True),
        route(8.0, lambda r: f"/api/v1/users/{skewed_int(r, 250_000)}", _USER_METHODS, reads, 880, 0.35, 0.015,
              ref_internal, 0.35, api=True),
        route(4.5, lambda r: f"/api/v1/products?category={cats.pick(r)}&page={pages.pick(r)}&sort={sorts.pick(r)}",
              "GET", reads, 14_500, 0.55, 0.045, ref_internal, 0.25, api=True),
        route(3.5, lambda r: f"/api/v1/search?q={terms.pick(r)}&limit=24", "GET", reads, 11_800, 0.6, 0.085,
              ref_internal, 0.25, api=True),
        route(3.0, lambda r: f"/api/v1/users/{skewed_int(r, 250_000)}/orders?page={pages.pick(r)}", "GET",
              reads, 3_900, 0.7, 0.032, ref_internal, 0.35, api=True),
        route(3.0, "/api/v1/cart", _CART_METHODS, writes, 1_250, 0.5, 0.021, ref_internal, 0.3, api=True),
        route(1.6, lambda r: f"/api/v1/cart/items/{skewed_int(r, 60_000)}", _CART_ITEM_METHODS, writes, 1_300, 0.4,
              0.024, ref_internal, 0.3, api=True),
        route(2.2, "/api/v1/auth/refresh", "POST", _LOGIN_STATUSES, 612, 0.05, 0.011, ref_internal, 0.4, api=True),
        route(1.0, "/api/v1/auth/login", "POST", _LOGIN_STATUSES, 640, 0.05, 0.12, ref_internal, 0.2, api=True),
        route(0.8, "/api/v1/orders", "POST", writes, 2_100, 0.3, 0.21, ref_internal, 0.2, api=True),
        route(1.4, lambda r: f"/api/v1/orders/{4_812_000 - skewed_int(r, 90_000)}", "GET", reads, 2_900, 0.4,
              0.027, ref_internal, 0.35, api=True),
        route(1.0, lambda r: f"/api/v1/users/{skewed_int(r, 250_000)}/avatar", "GET", reads, 9_800, 0.8, 0.006,
              ref_internal, 0.2, api=True),
    ]


def _product_page(r: Callable[[], float]) -> str:
    pid = skewed_int(r, 60_000)
    return f"/products/{pid}/{product_slug(pid)}{_UTM_MIX.pick(r)}"


def _page_routes(route: _RouteBuilder, ref_internal: Distribution[str],
                 ref_mixed: Distribution[str]) -> list[tuple[Route, float]]:
    """The shop's HTML pages, and the product images they show."""
    pages, cats, blog, variants = _PAGE_NUMBERS, _CATEGORY_MIX, _BLOG_MIX, _IMAGE_VARIANTS
    return [
        route(6.0, _product_page, _GET_OR_HEAD, _PAGE_STATUSES, 61_000, 0.15, 0.048, ref_mixed, 0.4),
        route(2.5, lambda r: f"/category/{cats.pick(r)}" + ("" if r() < 0.7 else f"?page={pages.pick(r)}"),
              _GET_OR_HEAD, _PAGE_STATUSES, 72_000, 0.2, 0.052, ref_mixed, 0.35),
        route(9.0, lambda r: f"/images/products/{skewed_int(r, 60_000)}/{variants.pick(r)}.webp", "GET",
              weighted([(200, 74), (304, 24), (404, 2)]), 28_000, 0.7, 0.0008, ref_internal, 0.1),
        route(0.8, lambda r: f"/blog/{blog.pick(r)}", _GET_OR_HEAD, _PAGE_STATUSES, 46_000, 0.3, 0.03, ref_mixed, 0.35),
        route(0.9, "/cart", "GET", _PAGE_STATUSES, 31_000, 0.1, 0.035, ref_internal, 0.05),
        route(0.6, "/checkout", "GET", _PAGE_STATUSES, 44_000, 0.1, 0.06, ref_internal, 0.05),
        route(0.7, "/login", "GET", _PAGE_STATUSES, 21_000, 0.05, 0.02, ref_mixed, 0.3),
        route(0.5, "/account", "GET", _PAGE_STATUSES, 27_000, 0.1, 0.04, ref_internal, 0.1),
        route(0.6, "/shop", "GET", _REDIRECT_STATUSES, 169, 0.0, 0.0, ref_mixed, 0.6),
    ]


def _special_routes(route: _RouteBuilder, ref_internal: Distribution[str]) -> list[tuple[Route, float]]:
    """Vulnerability scanners, the notifications websocket, load-balancer health checks and the metrics scrape."""
    scan_paths = _SCAN_PATHS
    return [
        route(0.35, lambda r: scan_paths.pick(r), _SCAN_METHODS, _SCAN_STATUSES, 153, 0.0, 0.001, None, 1.0),
        route(0.4, "/ws/notifications", "GET", weighted([(101, 97), (400, 3)]), 0, 0.0, 38.0, ref_internal, 0.0),
        route(3.5, lambda r: "/healthz" if r() < 0.6 else "/health", "GET", _HEALTH_STATUSES, 2, 0.0, 0.0004, None,
              1.0, client="probe"),
        route(0.4, "/metrics", "GET", _HEALTH_STATUSES, 28_000, 0.05, 0.009, None, 1.0, client="scraper"),
    ]
