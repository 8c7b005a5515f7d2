"""The service's heap trim: at most once per interval, and glibc's malloc_trim really called."""

from __future__ import annotations

import ctypes

from transcoder.service.heap import HeapTrim, malloc_trim


def test_trims_once_per_interval_from_a_loop_that_turns_often() -> None:
    now = [100.0]
    calls: list[float] = []
    heap = HeapTrim(lambda: calls.append(now[0]) or 1, interval_s=60, clock=lambda: now[0])
    for _ in range(300):  # 150 s of a loop turning every 0.5 s
        now[0] += 0.5
        heap.tick()
    assert calls == [160.0, 220.0] and heap.trims == 2


def test_glibcs_malloc_trim_gives_back_freed_heap() -> None:
    trim = malloc_trim()
    assert trim is not None  # the image and CI are glibc (Debian)
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(64 * 1024) for _ in range(400)]  # 25 MiB below glibc's mmap threshold: in the heap
    for b in blocks[:-1]:
        libc.free(b)  # freed, but the last block still holds the top of the heap: free alone returns nothing
    assert trim() == 1
    libc.free(blocks[-1])

