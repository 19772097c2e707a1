//! What every call shares beside its conversions: thread counts (`threads_of`, bounded as
//! the CLI's `--threads`), the pools library calls run on (`default_pool`, rebuilt in a
//! forked child; `pool` for a call's own count), size checks made before anything is
//! allocated (`fits`, `try_vec`, `mib_bytes`), and `run_interruptible`, which lets Ctrl-C
//! through while a long call runs with the GIL released.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;

use crate::error::SaintflowError;

/// A `threads` argument as a worker count: `None` one per core; 0 or more than
/// [`saintflow::machine::MAX_THREADS`] a `ValueError`, as they are the CLI's usage errors
/// (issue 55 item 5: `threads=10**6` tried to start a million threads and never returned).
pub(crate) fn threads_of(threads: Option<usize>) -> PyResult<NonZeroUsize> {
    let cores = saintflow::machine::cores();
    match threads.map(NonZeroUsize::new) {
        None => Ok(cores),
        Some(None) => Err(PyValueError::new_err(format!(
            "threads = 0: expected 1 ..= {} (None: one per core, {cores} here)",
            saintflow::machine::MAX_THREADS,
        ))),
        Some(Some(t)) if t.get() > saintflow::machine::MAX_THREADS => {
            Err(PyValueError::new_err(format!(
                "threads = {t}: expected at most {} (the command line's --threads bound)",
                saintflow::machine::MAX_THREADS
            )))
        }
        Some(Some(t)) => Ok(t),
    }
}

/// `MemoryError` unless `bytes` for `what` fit the memory this process may use: a size
/// from an argument is checked before anything is allocated (issue 55 item 3: the
/// interpreter aborted on `memory allocation of N bytes failed` instead).
pub(crate) fn fits(what: impl FnOnce() -> String, bytes: u128) -> PyResult<()> {
    match saintflow::machine::allocatable() {
        Some((limit, source)) if bytes > u128::from(limit) => Err(PyMemoryError::new_err(format!(
            "{}: needs {}, more than the memory this process may use ({}, {source})",
            what(),
            saintflow::machine::human(bytes),
            saintflow::machine::human(u128::from(limit))
        ))),
        _ => Ok(()),
    }
}

/// A vector of `len` copies of `v`, or `MemoryError` when the allocation fails (a size
/// that fits the limit may still not fit what is free).
pub(crate) fn try_vec<T: Clone>(what: &str, len: usize, v: T) -> PyResult<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        PyMemoryError::new_err(format!(
            "{what}: cannot allocate {len} values of {} bytes",
            std::mem::size_of::<T>()
        ))
    })?;
    out.resize(len, v);
    Ok(out)
}

/// `memory_mib` in bytes: more than the memory this process may use is a `ValueError`
/// (it was shifted left by 20 bits unchecked).
pub(crate) fn mib_bytes(memory_mib: usize) -> PyResult<usize> {
    let bytes = memory_mib.checked_mul(1 << 20);
    let limit = saintflow::machine::allocatable();
    match (bytes, &limit) {
        (Some(b), Some((l, _))) if b as u128 <= u128::from(*l) => Ok(b),
        (Some(b), None) => Ok(b),
        _ => Err(PyValueError::new_err(format!(
            "memory_mib = {memory_mib}: expected at most the memory this process may use{}",
            limit
                .map(|(l, src)| format!(" ({} MiB, {src})", l >> 20))
                .unwrap_or_default()
        ))),
    }
}

/// The pool that calls without a thread count of their own run on (one worker per core).
/// Every library call runs inside a pool the binding built in this process: rayon's global
/// pool, once started, is inherited by a forked child (a PyTorch `DataLoader` worker)
/// without its threads, and any parallel iterator on it waits forever (issue 55 item 11).
/// This pool is rebuilt when the process id changes; the parent's is leaked in the child
/// (dropping it would signal threads that do not exist there). Only touched with the GIL
/// held, so a fork, which Python makes holding the GIL, never copies the mutex locked.
static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

pub(crate) fn default_pool() -> PyResult<Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let mut slot = POOL
        .lock()
        .map_err(|_| SaintflowError::new_err("the thread pool's lock was poisoned"))?;
    if let Some((p, pool)) = slot.as_ref() {
        if *p == pid {
            return Ok(pool.clone());
        }
    }
    if let Some(parents) = slot.take() {
        std::mem::forget(parents);
    }
    let pool = Arc::new(pool(saintflow::machine::cores())?);
    *slot = Some((pid, pool.clone()));
    Ok(pool)
}

/// `f` on the default pool with the GIL released.
pub(crate) fn on_pool<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    let pool = default_pool()?;
    Ok(py.detach(|| pool.install(f)))
}

/// A pool of `threads` workers: the engine's own `exec::rayon_pool`.
pub(crate) fn pool(threads: NonZeroUsize) -> PyResult<rayon::ThreadPool> {
    saintflow::exec::rayon_pool(threads)
        .map_err(|e| SaintflowError::new_err(format!("cannot start {threads} threads: {e}")))
}

/// Runs `f` on a scoped thread with the GIL released, checking for Ctrl-C every 50 ms:
/// on KeyboardInterrupt, `flag` is set, `f` is waited for (it stops at its next step), and
/// the interrupt is returned in place of `f`'s result, which is dropped (every caller
/// raised it so).
pub(crate) fn run_interruptible<T: Send>(
    py: Python<'_>,
    flag: &AtomicBool,
    f: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    let mut interrupted = None;
    let result = py.detach(|| {
        std::thread::scope(|s| {
            let h = s.spawn(f);
            while !h.is_finished() {
                std::thread::sleep(Duration::from_millis(50));
                if interrupted.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        flag.store(true, Ordering::Relaxed);
                        interrupted = Some(e);
                    }
                }
            }
            match h.join() {
                Ok(v) => v,
                Err(p) => std::panic::resume_unwind(p),
            }
        })
    });
    match interrupted {
        Some(k) => Err(k),
        None => Ok(result),
    }
}
