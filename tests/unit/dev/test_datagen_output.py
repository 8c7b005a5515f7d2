"""The generators' output is pinned: benchmarks and `evaluate`'s figures are only comparable while it stays the same."""

from __future__ import annotations

import hashlib
from itertools import islice

import pytest

from transcoder.dev.datagen import KINDS, generate

# SHA-256 of the first 2,000 records of each kind (seed 0, keys and headers on), as datagen.py made
# them before it became a package (f36ec47).  A change here changes every figure measured on seeded data.
PINNED = {
    "nginx": "6ed78f29142ce9c3c4a2442c02e7826cefb0bd35bbf9aa736052fd76e5737546",
    "nginx-error": "f0fa58389b09c7ba3de55cfb343e5ce8101b0427cd10e5152ac86c2b2eb41f53",
    "json-logs": "6211a51618bc45cdbf383cf658f70959e3251bdcd3f13c122973ab982180a194",
    "dns": "a2ae3b59acfd8b544bc1745c4dd1ea4d3bdc1a2c9397b4385fe9f6df18e41eb6",
    "metrics": "3902eb8d81c893984ace5f98746d22f879211b3d74d2f08eee3f4c1520762fd7",
    "entities": "f8e1ca3aa49c67c11dd8578d9501c4a9a081c8504b6a261827e2655033b2dd23",
}


def test_every_kind_is_pinned():
    assert set(PINNED) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_output_is_byte_for_byte_the_pinned_one(kind):
    digest = hashlib.sha256()
    for r in islice(generate(kind, seed=0, keys=True, headers=True), 2000):
        digest.update(repr((r.key, r.value, r.headers, r.timestamp_ms)).encode())
    assert digest.hexdigest() == PINNED[kind]
