//! Data-parallel training on several ranks (issue 17, GAD's optimiser): each rank trains
//! the plan on its own part store with the ordinary engine, and after every step the ranks
//! combine their gradients by one allreduce of `[ζ_i·∇W_i ‖ ζ_i ‖ σ²_i ‖ loss_i]`; every
//! rank then applies the same update ∑ζ_i·∇W_i / ∑ζ_i, so the parameters stay identical
//! (checked by a hash every epoch). Rank 0 evaluates on the full graph, logs and
//! checkpoints; every rank resumes from rank 0's checkpoint.
//!
//! The transport is a [`Collective`]: MPI in the `mpi` feature (`train::mpi::MpiComm`),
//! or [`ThreadGroup`], ranks as threads of one process (tests,
//! and anyone who wants to see the consensus without MPI).
//!
//! ## The consensus weight ζ
//! Every rank applies ∇Ŵ = Σ ζ_i·∇W_i / Σ ζ_j (GAD's Eq. 15), with ζ_i by `consensus`:
//! * `"gad"` (default): GAD's variance-based importance of rank i's augmented subgraph
//!   (Eq. 14; [`super::zeta`] says how p(v), d(i, j) and β are read, checked against the
//!   paper's Example 3), computed once when the rank loads its store.
//! * `"loss_variance"`: saintflow's earlier weighting, written before the paper was at
//!   hand and not GAD's: ζ_i = n_i · exp(−β · σ²_i / σ̄²), where
//!   * n_i is the number of training nodes of rank i's part, so that with β = 0 the
//!     combined gradient is that of the loss averaged over all training nodes (each rank's
//!     loss is a mean over its own);
//!   * σ²_i is the variance of rank i's step losses, an exponential moving estimate
//!     (weight [`VARIANCE_DECAY`] on the past);
//!   * σ̄² is the mean of the σ²_j over ranks at the previous step (carried by the same
//!     allreduce), so β is scale-free: a rank twice as noisy as the average gets
//!     exp(−β) of the weight of a rank with none.
//! * `"mean"`: ζ_i = 1, the plain mean of the ranks' gradients (GAD's Eq. 11).
//!
//! docs/DISTRIBUTED.md maps the paper's pipeline (its Fig. 1) to saintflow's commands and
//! functions, and the log's distributed fields to the paper's tables.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::plan::{Consensus, Distributed};

use super::checkpoint::DistState;
use super::TrainError;

/// The weight of the past in the moving estimate of a rank's loss variance.
pub const VARIANCE_DECAY: f64 = 0.9;

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
    fn allreduce_f32(&self, buf: &mut [f32]) -> Result<(), TrainError>;
    /// Element-wise `op` over ranks, in place.
    fn allreduce_u64(&self, buf: &mut [u64], op: ReduceOp) -> Result<(), TrainError>;
    /// The transport's name for the log (`mpi`, `threads`).
    fn name(&self) -> String;
}

/// Whether `x` is the same on every rank.
pub fn all_equal(comm: &dyn Collective, x: u64) -> Result<bool, TrainError> {
    let mut lo = [x];
    let mut hi = [x];
    comm.allreduce_u64(&mut lo, ReduceOp::Min)?;
    comm.allreduce_u64(&mut hi, ReduceOp::Max)?;
    Ok(lo[0] == hi[0])
}

/// How a training run takes part in a distributed job
/// ([`TrainOptions::distributed`](crate::train::TrainOptions::distributed)).
#[derive(Clone)]
pub struct Dist<'a> {
    /// The transport.
    pub comm: Arc<dyn Collective>,
    /// Who evaluates, on what; every rank must be given the same variant.
    pub eval: DistEval<'a>,
    /// Bytes of this rank's replicas (features and labels of the nodes its part copies from
    /// other parts), summed over ranks into the log's `run` record.
    pub replica_bytes: u64,
}

impl std::fmt::Debug for Dist<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dist")
            .field("comm", &self.comm.name())
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.size())
            .field(
                "eval",
                &match self.eval {
                    DistEval::Rank0(g) => format!("rank 0 on {:?}", g.map(|s| s.path())),
                    DistEval::Parts => "parts".into(),
                },
            )
            .field("replica_bytes", &self.replica_bytes)
            .finish()
    }
}

/// Where a distributed run's validation and test metrics come from.
#[derive(Clone, Copy)]
pub enum DistEval<'a> {
    /// Rank 0 evaluates on this graph (the full graph the parts were cut from; None on the
    /// other ranks, which never evaluate, and on rank 0 its own part store).
    Rank0(Option<&'a crate::store::GraphStore>),
    /// Every rank evaluates its own part's validation and test nodes on its part store
    /// (each sees its part and replicas only, GAD's setting); the per-class counts are
    /// summed over ranks.
    Parts,
}

/// One rank's side of the consensus: its weight ζ_i, the moving estimate of its loss
/// variance, and the combination of gradients after the allreduce.
#[derive(Clone, Debug)]
pub struct ConsensusState {
    plan: Distributed,
    /// n_i.
    n_train: f64,
    /// ζ_i of Eq. 14 (the `gad` consensus).
    importance: f64,
    mean: f64,
    var: f64,
    seen: bool,
    /// σ̄² of the previous step (0 before the first).
    var_bar: f64,
}

/// What [`ConsensusState::combine`] leaves: the combined gradients (in the order given) and
/// the step's figures.
#[derive(Clone, Debug)]
pub struct Combined {
    /// ∑ζ_i·∇W_i / ∑ζ_i for each parameter, concatenated in the order given.
    pub grads: Vec<f32>,
    /// The offset of each parameter's gradient in `grads`.
    pub offsets: Vec<usize>,
    /// The mean of the ranks' step losses.
    pub loss: f64,
    /// This rank's ζ_i.
    pub weight: f64,
    /// Bytes this rank sent into the allreduce.
    pub bytes: u64,
}

impl ConsensusState {
    /// The state of a rank with `n_train` training nodes whose subgraph's importance
    /// (Eq. 14, used by the `gad` consensus) is `importance`.
    pub fn new(plan: Distributed, n_train: usize, importance: f64) -> ConsensusState {
        ConsensusState {
            plan,
            n_train: n_train as f64,
            importance,
            mean: 0.0,
            var: 0.0,
            seen: false,
            var_bar: 0.0,
        }
    }

    /// Takes this step's loss into the variance estimate.
    pub fn observe(&mut self, loss: f64) {
        if !self.seen {
            self.mean = loss;
            self.seen = true;
            return;
        }
        let d = loss - self.mean;
        self.mean += (1.0 - VARIANCE_DECAY) * d;
        self.var = VARIANCE_DECAY * (self.var + (1.0 - VARIANCE_DECAY) * d * d);
    }

    /// ζ_i of Eq. 14 as given to [`ConsensusState::new`].
    pub fn importance(&self) -> f64 {
        self.importance
    }

    /// σ²_i, the moving estimate of this rank's loss variance.
    pub fn variance(&self) -> f64 {
        self.var
    }

    /// ζ_i for this step (see the module's documentation).
    pub fn weight(&self) -> f64 {
        match self.plan.consensus {
            Consensus::Mean => 1.0,
            Consensus::Gad => self.importance,
            Consensus::LossVariance => {
                let ratio = if self.var_bar > 0.0 {
                    self.var / self.var_bar
                } else {
                    1.0
                };
                self.n_train * (-self.plan.beta * ratio).exp()
            }
        }
    }

    /// Every rank's state, gathered (a collective call): what rank 0's checkpoint keeps.
    pub fn gather(&self, comm: &dyn Collective) -> Result<DistState, TrainError> {
        let (rank, size) = (comm.rank(), comm.size());
        let mut buf = vec![0u64; 3 * size];
        buf[3 * rank..3 * rank + 3].copy_from_slice(&[
            self.mean.to_bits(),
            self.var.to_bits(),
            u64::from(self.seen),
        ]);
        comm.allreduce_u64(&mut buf, ReduceOp::Sum)?;
        Ok(DistState {
            ranks: buf
                .chunks_exact(3)
                .map(|c| (f64::from_bits(c[0]), f64::from_bits(c[1]), c[2] != 0))
                .collect(),
            var_bar: self.var_bar,
        })
    }

    /// Takes rank `rank`'s state back from a checkpoint of a run with `size` ranks.
    pub fn restore(
        &mut self,
        saved: Option<&DistState>,
        rank: usize,
        size: usize,
        path: &std::path::Path,
    ) -> Result<(), TrainError> {
        let bad = |what: String| TrainError::Checkpoint {
            path: path.to_path_buf(),
            what,
        };
        let s = saved.ok_or_else(|| {
            bad("written by a single-process run; a distributed run cannot continue it".into())
        })?;
        if s.ranks.len() != size {
            return Err(bad(format!(
                "written by a run of {} ranks, this job has {size}",
                s.ranks.len()
            )));
        }
        (self.mean, self.var, self.seen) = s.ranks[rank];
        self.var_bar = s.var_bar;
        Ok(())
    }

    /// Observes `loss`, then combines `grads` (this rank's gradients, in an order every rank
    /// shares) with the other ranks' by one allreduce.
    pub fn combine(
        &mut self,
        comm: &dyn Collective,
        loss: f64,
        grads: &[&[f32]],
    ) -> Result<Combined, TrainError> {
        self.observe(loss);
        let zeta = self.weight();
        let total: usize = grads.iter().map(|g| g.len()).sum();
        let mut buf = Vec::with_capacity(total + 3);
        let mut offsets = Vec::with_capacity(grads.len());
        for g in grads {
            offsets.push(buf.len());
            buf.extend(g.iter().map(|&x| (zeta * f64::from(x)) as f32));
        }
        buf.extend([zeta as f32, self.var as f32, loss as f32]);
        comm.allreduce_f32(&mut buf)?;
        let ranks = comm.size() as f64;
        let loss_mean = f64::from(buf[total + 2]) / ranks;
        self.var_bar = f64::from(buf[total + 1]) / ranks;
        let z = buf[total];
        if !(z.is_finite() && z > 0.0) {
            return Err(TrainError::Run(format!(
                "distributed consensus: the ranks' weights sum to {z} (every rank's part weighs nothing?)"
            )));
        }
        buf.truncate(total);
        for x in &mut buf {
            *x /= z;
        }
        Ok(Combined {
            grads: buf,
            offsets,
            loss: loss_mean,
            weight: zeta,
            bytes: ((total + 3) * 4) as u64,
        })
    }
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
    pub fn run<T: Send>(
        size: usize,
        f: impl Fn(ThreadRank) -> Result<T, TrainError> + Sync,
    ) -> Vec<Result<T, TrainError>> {
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
    ) -> Result<MutexGuard<'g, GroupState>, TrainError> {
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
            Some(why) => Err(TrainError::Run(format!("distributed: {why}"))),
            None => Ok(st),
        }
    }

    /// Every rank's payload, in rank order.
    fn exchange(&self, rank: usize, mine: Payload) -> Result<Vec<Payload>, TrainError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = &st.aborted {
            return Err(TrainError::Run(format!("distributed: {why}")));
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

    fn allreduce_f32(&self, buf: &mut [f32]) -> Result<(), TrainError> {
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

    fn allreduce_u64(&self, buf: &mut [u64], op: ReduceOp) -> Result<(), TrainError> {
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

fn mismatch() -> TrainError {
    TrainError::Run("distributed: the ranks made different collective calls".into())
}
