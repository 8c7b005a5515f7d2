"""entities: keyed JSON upserts and tombstones of user accounts, for compacted topics."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterator

from transcoder.dev.datagen.draws import Distribution, weighted, zipf, zipf_weights
from transcoder.dev.datagen.identifiers import pod_suffix
from transcoder.dev.datagen.stream import Record, StreamContext
from transcoder.dev.datagen.timetext import PerSecondText, iso_time

_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

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
_COUNTRY_MIX = Distribution(_COUNTRIES, [c[1] for c in _COUNTRIES])
_PLAN_MIX = weighted(_PLANS)
_TAG_MIX = zipf(range(len(_ENTITY_TAGS)), 1.0)


def _ascii_fold(s: str) -> str:
    """`s` in ASCII letters and digits only, as an e-mail address's local part spells a name."""
    decomposed = unicodedata.normalize("NFKD", s.translate(_FOLD))
    return "".join(c for c in decomposed if c.isascii() and c.isalnum())


class _Accounts:
    """Creates an account's fields and changes a few of them per update.

    An account while it exists: [version, JSON prefix of the stable fields, status, balance, logins,
    tags as JSON, tags as indexes into _ENTITY_TAGS].
    """

    __slots__ = ("_encode", "_ids", "_rnd")

    def __init__(self, rnd: Callable[[], float], ids: list[str]) -> None:
        self._rnd = rnd
        self._ids = ids
        self._encode = _JSON.encode

    def create(self, i: int, iso: str) -> list:
        """Account `i`, created at `iso`."""
        rnd, encode, ids, countries, plans, tag_dist = self._rnd, self._encode, self._ids, _COUNTRY_MIX, _PLAN_MIX, _TAG_MIX
        country, _, locale, currency, cities, firsts, lasts, domains = countries.pick(rnd)
        first, last = firsts[int(rnd() * len(firsts))], lasts[int(rnd() * len(lasts))]
        f, ln = _ascii_fold(first).lower(), _ascii_fold(last).lower()
        style = rnd()
        local = (f"{f}.{ln}" if style < 0.35 else f"{f}{ln}{int(rnd() * 99)}" if style < 0.6 else
                 f"{f[0]}{ln}" if style < 0.75 else f"{f}_{ln}{1960 + int(rnd() * 46)}" if style < 0.9 else f"{ln}.{f}")
        domain = domains[min(int(len(domains) * rnd() * rnd() * 1.6), len(domains) - 1)]
        stable = encode({
            "id": ids[i], "name": f"{first} {last}", "email": f"{local}@{domain}", "country": country,
            "city": cities[int(rnd() * rnd() * len(cities))], "locale": locale, "currency": currency,
            "plan": plans.pick(rnd), "created_at": iso,
        })[:-1]
        tags = sorted({tag_dist.pick(rnd) for _ in range(int(rnd() * 3))})
        status = "pending" if rnd() < 0.3 else "active"
        return [0, stable, status, 0.0, 0, encode([_ENTITY_TAGS[t] for t in tags]), tags]

    def update(self, e: list) -> None:
        """Move account `e` on: its status, balance, logins and tags may change."""
        rnd, encode, tag_dist = self._rnd, self._encode, _TAG_MIX
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


def _alive_or_other(live: list[list | None], i: int, ranks: Distribution[int], rnd: Callable[[], float]) -> int:
    """`i` if account `i` exists, else another drawn id; hot accounts exist, so a few draws suffice (16 at most)."""
    for _ in range(16):
        if live[i] is not None:
            break
        i = ranks.pick(rnd)
    return i


def generate_entities(ctx: StreamContext) -> Iterator[Record]:
    """Upserts of 50,000 accounts (hot ones Zipf-skewed) and ~4% tombstones; always keyed by account id."""
    pool, rng, clock, hdr = ctx.pool, ctx.rng, ctx.clock, ctx.headers
    rnd = rng.random
    n = _ENTITY_COUNT
    # A cheap fixed permutation (multiplier coprime with n) so the hot ids are scattered.
    stride, offset = 7919, pool.randrange(n)
    ranks = Distribution([((r * stride + offset) % n) for r in range(n)], zipf_weights(n, 1.0))
    ids = [f"user-{i + 1:06d}" for i in range(n)]
    accounts = _Accounts(rnd, ids)
    live: list[list | None] = [None] * n
    sources = [f"users-api-6c9f7b8d4-{pod_suffix(pool)}" for _ in range(3)]
    now_text = PerSecondText(iso_time)

    while True:
        times = clock.block()
        for t, i in zip(times, ranks.block(rng), strict=False):
            ms = int(t)
            iso = f"{now_text(ms // 1000)}.{ms % 1000:03d}Z"
            if rnd() < _TOMBSTONE_SHARE:
                # Delete something that exists.
                i = _alive_or_other(live, i, ranks, rnd)
                if live[i] is not None:
                    live[i] = None
                    yield Record(ids[i].encode(), None,
                                 hdr.make(hdr.choose(sources), trace=True, content=False)
                                 if hdr is not None else (), ms)
                    continue
            e = live[i]
            if e is None:
                e = live[i] = accounts.create(i, iso)
            else:
                accounts.update(e)
            e[0] += 1
            value = (f'{e[1]},"updated_at":"{iso}","version":{e[0]},"status":"{e[2]}","balance":{e[3]:.2f},'
                     f'"login_count":{e[4]},"tags":{e[5]}}}').encode()
            yield Record(ids[i].encode(), value,
                         hdr.make(hdr.choose(sources), trace=True) if hdr is not None else (), ms)
