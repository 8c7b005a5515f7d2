//! Where the compression pool's CPU goes: batches are sealed on rayon's pool, whose threads belong to no client,
//! so each job's CPU time (its thread's CPU clock around the job) is added to the thread that asked for it
//! (its kernel id). transcoder's thread ledger adds it to that thread's owner (a lane's producer), and leaves the
//! pool's own threads (named `tc-seal-N`) out: their CPU is all in these sums.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use pyo3::prelude::*;
use rayon::prelude::*;

/// The pool's thread names start with this (Linux keeps 15 bytes of a thread's name).
pub const POOL_THREAD_PREFIX: &str = "tc-seal-";

fn delegated() -> &'static Mutex<HashMap<i64, u64>> {
    static DELEGATED: OnceLock<Mutex<HashMap<i64, u64>>> = OnceLock::new();
    DELEGATED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// This thread's CPU time, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The kernel id of the calling thread.
fn caller_tid() -> i64 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// `job` run and timed on the thread that runs it: its result, and its CPU nanoseconds when that thread is one of
/// the pool's (a job the caller runs itself is in the caller's own CPU already).
fn timed<T>(job: impl FnOnce() -> T) -> (T, u64) {
    if rayon::current_thread_index().is_none() {
        return (job(), 0);
    }
    let t0 = thread_cpu_ns();
    let out = job();
    (out, thread_cpu_ns().saturating_sub(t0))
}

/// `f` over `jobs` on the pool with the GIL released, each job's CPU counted for the calling thread.
pub fn par_map<J: Sync, T: Send>(py: Python<'_>, jobs: &[J], f: impl Fn(&J) -> T + Sync + Send) -> Vec<T> {
    let caller = caller_tid();
    let done: Vec<(T, u64)> = py.detach(|| jobs.par_iter().map(|j| timed(|| f(j))).collect());
    add(caller, done.iter().map(|(_, ns)| ns).sum());
    done.into_iter().map(|(out, _)| out).collect()
}

/// Add the pool's nanoseconds spent for thread `tid`.
fn add(tid: i64, ns: u64) {
    if ns > 0 {
        *delegated().lock().unwrap_or_else(|e| e.into_inner()).entry(tid).or_insert(0) += ns;
    }
}

/// Name the pool's threads (once, before the pool's first job); a pool already built is left as it is.
pub fn name_pool() {
    let _ = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("{POOL_THREAD_PREFIX}{i}")).build_global();
}

/// CPU seconds the compression pool spent for each thread that asked it (kernel thread id -> seconds), since
/// this process started.
#[pyfunction]
pub fn pool_cpu_by_thread() -> HashMap<i64, f64> {
    delegated().lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(&t, &ns)| (t, ns as f64 / 1e9)).collect()
}
