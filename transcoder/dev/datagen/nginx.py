"""nginx: the access log, "combined" format with $request_time appended, keyed by client IP."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from transcoder.dev.datagen.draws import TABLE_SIZE, Distribution, normal_table, zipf
from transcoder.dev.datagen.identifiers import public_ipv4, public_ipv6
from transcoder.dev.datagen.nginx_routes import nginx_routes
from transcoder.dev.datagen.stream import Record, StreamContext
from transcoder.dev.datagen.timetext import access_log_time

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

# (IP, IP as the key, user agent, protocol, sends referers like a browser)
Client = tuple[str, bytes, str, str, bool]

_PROBES: list[Client] = [(ip, ip.encode(), ua, "HTTP/1.1", False) for ip, ua in (
    ("10.0.1.10", "ELB-HealthChecker/2.0"), ("10.0.2.10", "ELB-HealthChecker/2.0"),
    ("10.0.3.10", "ELB-HealthChecker/2.0"), ("10.42.0.1", "kube-probe/1.31"))]
_SCRAPER: Client = ("10.0.5.20", b"10.0.5.20", "Prometheus/2.55.1", "HTTP/1.1", False)


def _nginx_clients(pool: random.Random, n: int = 4000) -> Distribution[Client]:
    uas = Distribution([u for u, _, _ in _USER_AGENTS], [w for _, w, _ in _USER_AGENTS])
    classes = {u: c for u, _, c in _USER_AGENTS}
    clients: list[Client] = []
    seen: set[str] = set()
    while len(clients) < n:
        ip = public_ipv6(pool) if pool.random() < 0.06 else public_ipv4(pool)
        if ip in seen:
            continue
        seen.add(ip)
        ua = uas.pick(pool.random)
        browser = classes[ua] == "browser"
        proto = "HTTP/2.0" if browser and pool.random() < 0.7 else "HTTP/1.1"
        clients.append((ip, ip.encode(), ua, proto, browser))
    # Zipf over randomly drawn clients: a few carrier NATs and office gateways dominate.
    return zipf(clients, 1.05)


def generate_nginx(ctx: StreamContext) -> Iterator[Record]:
    """Access-log lines of six web servers shipped to one topic."""
    pool, rng, clock, keyed, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.keys, ctx.headers
    rnd = rng.random
    routes = nginx_routes(pool)
    clients = _nginx_clients(pool)
    probes, scraper = _PROBES, _SCRAPER
    pick_headers = hdr.picker([f"web-{i:02d}" for i in range(1, 7)]) if hdr is not None else None
    normal = normal_table(pool)
    exp = math.exp
    n_tab = float(TABLE_SIZE)
    last_sec = -1
    now = ""

    while True:
        times = clock.block()
        for t, route, client in zip(times, routes.block(rng), clients.block(rng), strict=False):
            ms = int(t)
            if ms // 1000 != last_sec:
                last_sec = ms // 1000
                now = access_log_time(last_sec)
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
