//! The consensus of a data-parallel step (issue 17, GAD's optimiser): each rank trains the
//! plan on its own part store with the ordinary engine, and after every step the ranks
//! combine their gradients by one allreduce of `[ζ_i·∇W_i ‖ ζ_i ‖ σ²_i ‖ loss_i]`; every
//! rank then applies the same update ∑ζ_i·∇W_i / ∑ζ_i, so the parameters stay identical
//! (checked by a hash every epoch). Rank 0 evaluates on the full graph, logs and
//! checkpoints; every rank resumes from rank 0's checkpoint.
//!
//! The transport is a [`Collective`]: MPI in the `mpi` feature
//! (`dist::mpi`), or [`ThreadGroup`](super::ThreadGroup), ranks as threads of one process.
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

use serde::{Deserialize, Serialize};

use crate::plan::{Consensus, Distributed};

use super::{Collective, DistError, ReduceOp};

/// The weight of the past in the moving estimate of a rank's loss variance.
pub const VARIANCE_DECAY: f64 = 0.9;

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
    pub fn gather(&self, comm: &dyn Collective) -> Result<DistState, DistError> {
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
    ) -> Result<(), DistError> {
        let bad = |what: String| DistError::Checkpoint {
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
    ) -> Result<Combined, DistError> {
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
            return Err(DistError::Run(format!(
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

/// What a distributed run's ranks keep between steps besides the parameters (identical on
/// every rank): each rank's moving loss estimates, gathered into rank 0's checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DistState {
    /// Each rank's `(mean, variance, seen)` of its step losses, in rank order.
    pub ranks: Vec<(f64, f64, bool)>,
    /// σ̄² after the last step.
    pub var_bar: f64,
}
