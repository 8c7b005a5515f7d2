"""Random identifiers as real systems print them: hex ids, UUIDs, pod-name suffixes, public IP addresses."""

from __future__ import annotations

import random

# First octets of busy public allocations; private, loopback and multicast ranges left out.
_PUBLIC_FIRST_OCTETS = (
    2, 5, 23, 24, 31, 37, 41, 45, 46, 47, 49, 50, 58, 62, 66, 67, 68, 69, 71, 73, 74, 76, 77, 78,
    79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 98, 99, 101, 103, 104, 107,
    108, 109, 110, 112, 114, 116, 117, 118, 121, 124, 125, 136, 141, 142, 146, 151, 152, 154, 157,
    162, 167, 173, 174, 176, 178, 180, 181, 185, 186, 187, 188, 189, 190, 191, 193, 194, 195, 197,
    200, 201, 202, 212, 213, 216, 217, 220, 223,
)
_IPV6_PREFIXES = ("2a02:", "2a01:", "2001:", "2600:", "2607:", "2a00:", "2409:", "2804:")
# Kubernetes' name-suffix alphabet: no vowels, no look-alike digits.
_POD_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def hex_id(rng: random.Random, digits: int) -> str:
    """`digits` random lower-case hex digits."""
    return format(rng.getrandbits(digits * 4), f"0{digits}x")


def uuid4_text(rng: random.Random) -> str:
    """A random (version 4, RFC 4122 variant) UUID in its canonical text form."""
    h = hex_id(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def pod_suffix(rng: random.Random) -> str:
    """The five-character random suffix Kubernetes gives a pod's name."""
    return "".join(rng.choice(_POD_SUFFIX_ALPHABET) for _ in range(5))


def public_ipv4(rng: random.Random) -> str:
    """A public-looking IPv4 address."""
    first = rng.choice(_PUBLIC_FIRST_OCTETS)
    return f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def public_ipv6(rng: random.Random) -> str:
    """A public-looking IPv6 address, sometimes with a :: run."""
    prefix = rng.choice(_IPV6_PREFIXES)
    groups = ":".join(format(rng.getrandbits(16), "x") for _ in range(3))
    tail = ":".join(format(rng.getrandbits(16), "x") for _ in range(rng.choice((1, 2, 4))))
    return f"{prefix}{format(rng.getrandbits(16), 'x')}:{groups}" + (f"::{tail}" if rng.random() < 0.5 else f":{tail}")
