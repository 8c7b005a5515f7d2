"""The compiled compression pool's CPU, per thread that asked for it (native/src/pool_cpu.rs).

Batches are sealed on rayon's pool (`seal_sections`, `encode_batches`), whose threads belong to no client; each
job's CPU time is added to the thread that called. `pool_cpu_by_thread()`: kernel thread id -> CPU seconds the pool
spent for it since the process started. The pool's own threads are named POOL_THREAD_PREFIX + N: a thread CPU
ledger leaves them out, as their CPU is all in those sums.
"""

from transcoder_native import POOL_THREAD_PREFIX, pool_cpu_by_thread

__all__ = ["POOL_THREAD_PREFIX", "pool_cpu_by_thread"]
