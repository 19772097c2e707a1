//! The ranks' transport (issue 17): the [`Collective`] trait every collective call of a
//! distributed run goes through, and [`ThreadGroup`], ranks as threads of one process (tests,
//! and anyone who wants to see the consensus without MPI); MPI is `dist::mpi` (the `mpi`
//! feature).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::DistError;

/// A reduction of [`Collective::allreduce_u64`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Wrapping sum.
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

impl ReduceOp {
    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            ReduceOp::Sum => a.wrapping_add(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::Max => a.max(b),
        }
    }
}

/// What distributed training needs of its transport: every call is collective (each rank
/// makes the same calls in the same order) and leaves the same result on every rank.
pub trait Collective: Send + Sync {
    /// This rank, from 0.
    fn rank(&self) -> usize;
    /// Ranks in all.
    fn size(&self) -> usize;
    /// Element-wise sum over ranks, in place. The sum must be the same on every rank (MPI's
    /// allreduce is; [`ThreadGroup`] sums in rank order).
    fn allreduce_f32(&self, buf: &mut [f32]) -> Result<(), DistError>;
    /// Element-wise `op` over ranks, in place.
    fn allreduce_u64(&self, buf: &mut [u64], op: ReduceOp) -> Result<(), DistError>;
    /// The transport's name for the log (`mpi`, `threads`).
    fn name(&self) -> String;
}

/// Whether `x` is the same on every rank.
pub fn all_equal(comm: &dyn Collective, x: u64) -> Result<bool, DistError> {
    let mut lo = [x];
    let mut hi = [x];
    comm.allreduce_u64(&mut lo, ReduceOp::Min)?;
    comm.allreduce_u64(&mut hi, ReduceOp::Max)?;
    Ok(lo[0] == hi[0])
}

/// Ranks as threads of one process: a [`Collective`] without MPI, deterministic (sums in
/// rank order). [`ThreadGroup::run`] starts the ranks; a rank that fails or panics aborts
/// the group, so the others' next collective call returns an error instead of waiting.
#[derive(Debug)]
pub struct ThreadGroup {
    size: usize,
    state: Mutex<GroupState>,
    cv: Condvar,
}

#[derive(Debug, Clone)]
enum Payload {
    None,
    F32(Vec<f32>),
    U64(Vec<u64>),
}

#[derive(Debug)]
struct GroupState {
    arrived: usize,
    generation: u64,
    aborted: Option<String>,
    slots: Vec<Payload>,
}

/// One rank of a [`ThreadGroup`].
#[derive(Debug, Clone)]
pub struct ThreadRank {
    rank: usize,
    group: Arc<ThreadGroup>,
}

impl ThreadGroup {
    /// Runs `f` on `size` ranks, each on its own thread, and returns their results in rank
    /// order. A rank's error or panic aborts the group (the others' collective calls fail);
    /// a panic is raised again once every rank has ended.
    pub fn run<T: Send, E: std::fmt::Display + Send>(
        size: usize,
        f: impl Fn(ThreadRank) -> Result<T, E> + Sync,
    ) -> Vec<Result<T, E>> {
        let group = Arc::new(ThreadGroup {
            size,
            state: Mutex::new(GroupState {
                arrived: 0,
                generation: 0,
                aborted: None,
                slots: vec![Payload::None; size],
            }),
            cv: Condvar::new(),
        });
        let f = &f;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..size)
                .map(|rank| {
                    let group = Arc::clone(&group);
                    s.spawn(move || {
                        let me = ThreadRank {
                            rank,
                            group: Arc::clone(&group),
                        };
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(me)));
                        match &r {
                            Ok(Err(e)) => group.abort(format!("rank {rank} failed: {e}")),
                            Err(_) => group.abort(format!("rank {rank} panicked")),
                            Ok(Ok(_)) => {}
                        }
                        r
                    })
                })
                .collect();
            let results: Vec<_> = handles
                .into_iter()
                .map(|h| h.join().expect("the rank's panic is caught"))
                .collect();
            results
                .into_iter()
                .map(|r| r.unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    fn abort(&self, why: String) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.aborted.get_or_insert(why);
        self.cv.notify_all();
    }

    /// Waits until every rank has arrived (or the group is aborted).
    fn barrier<'g>(
        &'g self,
        mut st: MutexGuard<'g, GroupState>,
    ) -> Result<MutexGuard<'g, GroupState>, DistError> {
        let gen = st.generation;
        st.arrived += 1;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation += 1;
            self.cv.notify_all();
        } else {
            while st.generation == gen && st.aborted.is_none() {
                st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        }
        match &st.aborted {
            Some(why) => Err(DistError::Run(format!("distributed: {why}"))),
            None => Ok(st),
        }
    }

    /// Every rank's payload, in rank order.
    fn exchange(&self, rank: usize, mine: Payload) -> Result<Vec<Payload>, DistError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &st.aborted {
            return Err(DistError::Run(format!("distributed: {why}")));
        }
        st.slots[rank] = mine;
        let st = self.barrier(st)?;
        let all = st.slots.clone();
        // Nobody writes the next payload before everyone has read this one.
        drop(self.barrier(st)?);
        Ok(all)
    }
}

impl Collective for ThreadRank {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.group.size
    }

    fn allreduce_f32(&self, buf: &mut [f32]) -> Result<(), DistError> {
        let all = self.group.exchange(self.rank, Payload::F32(buf.to_vec()))?;
        buf.fill(0.0);
        for p in all {
            let Payload::F32(v) = p else {
                return Err(mismatch());
            };
            if v.len() != buf.len() {
                return Err(mismatch());
            }
            for (b, x) in buf.iter_mut().zip(v) {
                *b += x;
            }
        }
        Ok(())
    }

    fn allreduce_u64(&self, buf: &mut [u64], op: ReduceOp) -> Result<(), DistError> {
        let all = self.group.exchange(self.rank, Payload::U64(buf.to_vec()))?;
        let mut out: Option<Vec<u64>> = None;
        for p in all {
            let Payload::U64(v) = p else {
                return Err(mismatch());
            };
            if v.len() != buf.len() {
                return Err(mismatch());
            }
            out = Some(match out {
                None => v,
                Some(acc) => acc.iter().zip(&v).map(|(&a, &b)| op.apply(a, b)).collect(),
            });
        }
        buf.copy_from_slice(&out.expect("at least one rank"));
        Ok(())
    }

    fn name(&self) -> String {
        "threads".into()
    }
}

fn mismatch() -> DistError {
    DistError::Run("distributed: the ranks made different collective calls".into())
}
