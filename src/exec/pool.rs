//! A work-stealing pool of p worker threads (crossbeam-deque): each worker has its own
//! deque, there is one global injector, and idle workers park instead of spinning. Work is
//! submitted through [`Pool::scope`], which returns only when every task spawned in it (and
//! every task those spawned) has finished, so tasks may borrow from the caller's stack.
//!
//! # Worker loop (after rayon-core's)
//!
//! A worker looks for a task in this order: (1) its own deque, LIFO — the task it pushed
//! last is the one whose inputs are hottest in its cache; (2) a random victim's deque,
//! stolen FIFO — the oldest task there, the farthest from what the victim works on (so two
//! column blocks pushed in order are run at once only from the two ends of the run, never
//! side by side); (3) the global injector, where threads that are not workers (the caller
//! of a step, the prefetcher) submit. Tasks spawned by a running task go to its worker's
//! own deque.
//!
//! # Sleep and wake
//!
//! An idle worker does not spin. The protocol uses one counter, `epoch`, bumped after
//! every push, and a mutex-protected count of sleepers with a condition variable:
//!
//! 1. A worker that finds nothing reads `epoch` (= e), then searches all queues once more.
//! 2. Still nothing: it locks the mutex and compares `epoch` with e. Changed: a task was
//!    pushed since step 1, so it unlocks and searches again. Unchanged: it counts itself as
//!    a sleeper and waits on the condition variable (which releases the mutex atomically).
//! 3. A pusher pushes the task, bumps `epoch` (SeqCst), then locks the mutex and, if there
//!    is a sleeper, notifies one.
//!
//! No wake-up is lost: if the pusher's bump comes before the sleeper's check in step 2,
//! the sleeper sees it and does not sleep; if it comes after, the pusher's lock waits until
//! the sleeper is inside `wait`, and its notification reaches it. A spurious or surplus
//! wake-up costs one more search. A task pushed while every worker is busy wakes nobody
//! (the count is 0) and is found by the next worker to finish its task.
//!
//! # No oversubscription
//!
//! Kernels parallelise on "the caller's rayon pool" (`saintflow_ops`; the `gemm` crate is
//! given `Parallelism::Rayon(rayon::current_num_threads())`). Each worker therefore builds
//! a one-thread rayon pool *on its own thread* (`ThreadPoolBuilder::use_current_thread`):
//! inside a task `rayon::current_num_threads()` is 1, parallel iterators run inline, and no
//! thread exists besides the p workers. Parallelism inside an op comes from the executor's
//! partitions (op × part tasks), not from rayon.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crossbeam_deque::{Injector, Stealer, Worker};

/// A unit of work with its lifetime erased (see [`Scope::spawn`] for why that is sound).
type Job = Box<dyn FnOnce() + Send + 'static>;

struct Shared {
    /// Identifies the pool, so a worker of another pool does not push to its own deque.
    id: usize,
    injector: Injector<Job>,
    stealers: Vec<Stealer<Job>>,
    /// Bumped after every push (the sleep protocol's `epoch`).
    epoch: AtomicU64,
    /// Workers waiting on `wake`.
    sleepers: Mutex<usize>,
    wake: Condvar,
    terminate: AtomicBool,
}

/// A pool of worker threads; dropping it stops and joins them (after their current task).
pub struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads.len())
            .finish()
    }
}

thread_local! {
    /// On a worker thread: its pool's id and its own deque.
    static LOCAL: Cell<Option<(usize, *const Worker<Job>)>> = const { Cell::new(None) };
    /// On a worker thread: its index in its pool.
    static INDEX: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The index (0..p) of the pool worker this thread is, or `None` off every pool.
pub fn current_worker() -> Option<usize> {
    INDEX.with(Cell::get)
}

static NEXT_POOL_ID: AtomicUsize = AtomicUsize::new(1);

impl Pool {
    /// A pool of exactly `threads` workers.
    pub fn new(threads: std::num::NonZeroUsize) -> Pool {
        let threads = threads.get();
        let workers: Vec<Worker<Job>> = (0..threads).map(|_| Worker::new_lifo()).collect();
        let shared = Arc::new(Shared {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            injector: Injector::new(),
            stealers: workers.iter().map(Worker::stealer).collect(),
            epoch: AtomicU64::new(0),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
            terminate: AtomicBool::new(false),
        });
        let threads = workers
            .into_iter()
            .enumerate()
            .map(|(index, local)| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("saintflow-worker-{index}"))
                    .spawn(move || worker_main(shared, index, local))
                    .expect("spawning a worker thread")
            })
            .collect();
        Pool { shared, threads }
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Runs `f` with a [`Scope`] to spawn tasks on, and returns once `f` and every task
    /// spawned in the scope have finished. A panic in `f` or in a task is re-raised here,
    /// after all tasks are done (never while one may still borrow from the caller).
    pub fn scope<'scope, R>(&self, f: impl FnOnce(&Scope<'scope>) -> R) -> R {
        let scope = Scope {
            pool: self.shared.clone(),
            latch: Arc::new(Latch::default()),
            _marker: std::marker::PhantomData,
        };
        let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        scope.latch.wait();
        if let Some(p) = scope.latch.panic.lock().expect("latch").take() {
            std::panic::resume_unwind(p);
        }
        match r {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    fn push(shared: &Shared, job: Job) {
        let local = LOCAL.with(Cell::get);
        match local {
            // SAFETY: LOCAL points at the deque owned by this very thread's `worker_main`
            // frame, which outlives every task the thread runs.
            Some((id, w)) if id == shared.id => unsafe { (*w).push(job) },
            _ => shared.injector.push(job),
        }
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        let sleepers = shared.sleepers.lock().expect("pool mutex");
        if *sleepers > 0 {
            shared.wake.notify_one();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.terminate.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.sleepers.lock().expect("pool mutex");
            self.shared.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Counts a scope's unfinished tasks; the scope's owner waits for zero.
#[derive(Default)]
struct Latch {
    pending: Mutex<usize>,
    done: Condvar,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Latch {
    fn wait(&self) {
        let mut p = self.pending.lock().expect("latch");
        while *p > 0 {
            p = self.done.wait(p).expect("latch");
        }
    }
}

/// Spawns tasks that may borrow data living for `'scope`; see [`Pool::scope`].
pub struct Scope<'scope> {
    pool: Arc<Shared>,
    latch: Arc<Latch>,
    _marker: std::marker::PhantomData<fn(&'scope ()) -> &'scope ()>,
}

impl<'scope> Scope<'scope> {
    /// Queues `f` on the pool (on the spawning worker's own deque when called from a task,
    /// on the injector otherwise). `f` gets the scope back, to spawn follow-up tasks.
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        *self.latch.pending.lock().expect("latch") += 1;
        let child = Scope {
            pool: self.pool.clone(),
            latch: self.latch.clone(),
            _marker: std::marker::PhantomData,
        };
        let job: Box<dyn FnOnce() + Send + 'scope> = Box::new(move || {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&child))) {
                let mut slot = child.latch.panic.lock().expect("latch");
                slot.get_or_insert(p);
            }
            let latch = child.latch.clone();
            drop(child);
            let mut pending = latch.pending.lock().expect("latch");
            *pending -= 1;
            if *pending == 0 {
                latch.done.notify_all();
            }
        });
        // SAFETY: the job borrows only data that lives for 'scope. `Pool::scope` does not
        // return (not even by unwinding) before the latch's count is back to zero, i.e.
        // before this job has run to its end; the job's last accesses are to its own `Arc`
        // of the latch. So nothing the job borrows is freed while it may still use it.
        let job: Job = unsafe { std::mem::transmute::<_, Job>(job) };
        Pool::push(&self.pool, job);
    }
}

/// Xorshift for victim choice: cheap, and different per worker.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn find_task(shared: &Shared, index: usize, local: &Worker<Job>, rng: &mut u64) -> Option<Job> {
    if let Some(j) = local.pop() {
        return Some(j);
    }
    let n = shared.stealers.len();
    if n > 1 {
        let start = (next_random(rng) % n as u64) as usize;
        for k in 0..n {
            let v = (start + k) % n;
            if v == index {
                continue;
            }
            loop {
                match shared.stealers[v].steal() {
                    crossbeam_deque::Steal::Success(j) => return Some(j),
                    crossbeam_deque::Steal::Empty => break,
                    crossbeam_deque::Steal::Retry => {}
                }
            }
        }
    }
    loop {
        match shared.injector.steal_batch_and_pop(local) {
            crossbeam_deque::Steal::Success(j) => return Some(j),
            crossbeam_deque::Steal::Empty => return None,
            crossbeam_deque::Steal::Retry => {}
        }
    }
}

fn worker_main(shared: Arc<Shared>, index: usize, local: Worker<Job>) {
    // This thread is the one thread of its own rayon pool: kernels called from tasks see
    // `current_num_threads() == 1` and run inline (see "No oversubscription" above).
    let _rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .thread_name(move |_| format!("saintflow-worker-{index}"))
        .build()
        .expect("a one-thread rayon pool on the worker's thread");
    LOCAL.with(|l| l.set(Some((shared.id, &local as *const Worker<Job>))));
    INDEX.with(|i| i.set(Some(index)));
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ ((index as u64 + 1) << 32);
    loop {
        if let Some(job) = find_task(&shared, index, &local, &mut rng) {
            job();
            continue;
        }
        if shared.terminate.load(Ordering::SeqCst) {
            break;
        }
        let e = shared.epoch.load(Ordering::SeqCst);
        if let Some(job) = find_task(&shared, index, &local, &mut rng) {
            job();
            continue;
        }
        let mut sleepers = shared.sleepers.lock().expect("pool mutex");
        if shared.epoch.load(Ordering::SeqCst) != e || shared.terminate.load(Ordering::SeqCst) {
            continue;
        }
        *sleepers += 1;
        sleepers = shared.wake.wait(sleepers).expect("pool mutex");
        *sleepers -= 1;
    }
    LOCAL.with(|l| l.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn every_task_runs_once_and_the_scope_waits_for_nested_spawns() {
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads.try_into().unwrap());
            let hits: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
            pool.scope(|s| {
                for i in 0..100 {
                    let hits = &hits;
                    s.spawn(move |s| {
                        for j in 0..10 {
                            s.spawn(move |_| {
                                hits[i * 10 + j].fetch_add(1, Ordering::Relaxed);
                            });
                        }
                    });
                }
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn a_panicking_task_is_re_raised_after_the_others_finish() {
        let pool = Pool::new(std::num::NonZeroUsize::new(2).unwrap());
        let done = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.scope(|s| {
                s.spawn(|_| panic!("boom"));
                for _ in 0..50 {
                    s.spawn(|_| {
                        done.fetch_add(1, Ordering::Relaxed);
                    });
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 50);
        // The pool still works afterwards.
        let again = AtomicUsize::new(0);
        pool.scope(|s| {
            s.spawn(|_| {
                again.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(again.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn tasks_see_a_one_thread_rayon_pool_and_only_p_threads_run_them() {
        let pool = Pool::new(std::num::NonZeroUsize::new(3).unwrap());
        let ids = Mutex::new(std::collections::HashSet::new());
        let widths = Mutex::new(Vec::new());
        pool.scope(|s| {
            for _ in 0..200 {
                s.spawn(|_| {
                    ids.lock().unwrap().insert(std::thread::current().id());
                    widths.lock().unwrap().push(rayon::current_num_threads());
                    // A parallel iterator inside a task runs on this thread only.
                    let inner: std::collections::HashSet<_> = (0..64)
                        .into_par_iter()
                        .map(|_| std::thread::current().id())
                        .collect();
                    assert_eq!(inner.len(), 1);
                });
            }
        });
        assert!(ids.lock().unwrap().len() <= 3);
        assert!(widths.lock().unwrap().iter().all(|&w| w == 1));
    }
}
