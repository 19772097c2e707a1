//! Every collective call of a training run, in one file (issue 24): training talks to the
//! other ranks only through a [`StepSync`], [`Local`] for one process (no call at all) or
//! [`Ranks`] for a rank of a distributed job. Every rank must make the same calls in the
//! same order, or the job deadlocks (MPI) or fails (`ThreadGroup`); the trainer makes them in
//! this order:
//!
//! 1. [`StepSync::graph_id`], once before anything is resumed: the job's identity (one
//!    allreduce of every rank's mixed store identity), what a checkpoint is tied to.
//! 2. [`StepSync::run_info`], once when the log starts: two allreduces (the replicas'
//!    bytes, every rank's ζ) for the run record.
//! 3. [`StepSync::steps`], at each phase's start: the most steps any rank's sampler wants
//!    per epoch (one allreduce); each step being collective, every rank takes that many.
//! 4. [`StepSync::combine`], after every step's backward: one allreduce of
//!    `[ζ·∇W ‖ ζ ‖ σ² ‖ loss]` (GAD's Eq. 15, [`super::consensus`]).
//! 5. [`StepSync::params_agree`], after every epoch: the parameters' hash compared (two
//!    allreduces).
//! 6. [`StepSync::sum_counts`], per evaluated role when every rank evaluates its own part:
//!    the per-class counts summed (one allreduce each).
//! 7. [`StepSync::stops`], after every evaluation of a plan with `[eval] patience`
//!    (every rank asks, evaluating or not): whether the evaluating rank(s) stop the run
//!    early (one allreduce).
//! 8. [`StepSync::gather`], after every epoch that writes a checkpoint: every rank's
//!    consensus state (one allreduce), which rank 0 saves.
//!
//! [`StepSync::restore`] (taking the state back from a checkpoint) makes no call, nor do
//! the questions a run asks of its place in the job: [`StepSync::writes_outputs`] (rank 0
//! writes the log and the checkpoint) and [`StepSync::job_name`]. [`step_sync`] makes the
//! right one for a run's options, and [`evaluation`] says which graph the run evaluates.

use std::path::Path;

use crate::log::RunDist;
use crate::plan::{Consensus, Distributed};
use crate::store::GraphStore;

use super::{
    all_equal, Collective, Combined, ConsensusState, Dist, DistError, DistEval, DistState, ReduceOp,
};

/// The [`StepSync`] of a run: [`Ranks`] when it takes part in the job `dist` (training
/// `store`, its part, under `plan`'s consensus), [`Local`] otherwise.
pub fn step_sync<'a>(
    dist: Option<&'a Dist<'a>>,
    plan: Distributed,
    store: &GraphStore,
    n_train: usize,
    seed: u64,
) -> Box<dyn StepSync + 'a> {
    match dist {
        Some(d) => Box::new(Ranks::new(d, plan, store, n_train, seed)),
        None => Box::new(Local),
    }
}

/// Which graph a run evaluates, and how.
#[derive(Clone, Copy)]
pub enum EvalOn<'g> {
    /// None: another rank evaluates the job.
    Elsewhere,
    /// This graph, whole: the store trained on, or the full graph a job's parts were cut
    /// from.
    Whole(&'g GraphStore),
    /// This rank's part, its per-class counts summed over the ranks
    /// ([`StepSync::sum_counts`]).
    Part(&'g GraphStore),
}

/// What a run training `own` evaluates: alone, `own`; in the job `dist`, what its
/// [`DistEval`] says for this rank.
pub fn evaluation<'g>(dist: Option<&Dist<'g>>, own: &'g GraphStore) -> EvalOn<'g> {
    let Some(d) = dist else {
        return EvalOn::Whole(own);
    };
    match d.eval {
        DistEval::Parts => EvalOn::Part(own),
        _ if d.comm.rank() != 0 => EvalOn::Elsewhere,
        DistEval::Rank0(full) => EvalOn::Whole(full.unwrap_or(own)),
    }
}

/// What a training run needs from the other ranks (see the module's documentation for the
/// order of the calls).
pub trait StepSync {
    /// This process's rank (0 alone).
    fn rank(&self) -> usize;
    /// The ranks of the job (1 alone).
    fn ranks(&self) -> usize;
    /// Whether this process writes the run's log and checkpoint (rank 0 of a job).
    fn writes_outputs(&self) -> bool {
        self.rank() == 0
    }
    /// What a checkpoint of this run is tied to, in words, when it is a job's ("this job's
    /// 4 parts"); None alone (a checkpoint is then tied to the store).
    fn job_name(&self) -> Option<String>;
    /// Call 1: what a checkpoint of this run is tied to, from this rank's store identity.
    fn graph_id(&self, identity: u64) -> Result<u64, DistError>;
    /// This rank's consensus state back from a checkpoint's (`path`'s) saved state.
    fn restore(&mut self, saved: Option<&DistState>, path: &Path) -> Result<(), DistError>;
    /// Call 2: the run record's distributed facts (None alone).
    fn run_info(&self) -> Result<Option<RunDist>, DistError>;
    /// Call 3: the steps per epoch every rank takes, from this rank's own count.
    fn steps(&self, mine: u64) -> Result<u64, DistError>;
    /// Call 4: this rank's step loss and gradients combined with the other ranks' (None
    /// alone: the rank's own are the update).
    fn combine(&mut self, loss: f64, grads: &[&[f32]]) -> Result<Option<Combined>, DistError>;
    /// Call 5, after `epoch`: an error when the ranks' parameter hashes (`hash()`,
    /// computed only in a job) differ: a rank applied another update.
    fn params_agree(&self, epoch: usize, hash: &dyn Fn() -> u64) -> Result<(), DistError>;
    /// Call 6: per-class counts summed over the ranks, in place.
    fn sum_counts(&self, flat: &mut [u64]) -> Result<(), DistError>;
    /// Call 7: whether any rank's evaluation stops the run early (`mine`: this rank's
    /// verdict, false where it does not evaluate).
    fn stops(&self, mine: bool) -> Result<bool, DistError>;
    /// Call 8: every rank's consensus state, for the checkpoint (None alone).
    fn gather(&self) -> Result<Option<DistState>, DistError>;
}

/// One process: no other rank, no call.
pub struct Local;

impl StepSync for Local {
    fn rank(&self) -> usize {
        0
    }
    fn ranks(&self) -> usize {
        1
    }
    fn job_name(&self) -> Option<String> {
        None
    }
    fn graph_id(&self, identity: u64) -> Result<u64, DistError> {
        Ok(identity)
    }
    fn restore(&mut self, _: Option<&DistState>, _: &Path) -> Result<(), DistError> {
        Ok(())
    }
    fn run_info(&self) -> Result<Option<RunDist>, DistError> {
        Ok(None)
    }
    fn steps(&self, mine: u64) -> Result<u64, DistError> {
        Ok(mine)
    }
    fn combine(&mut self, _: f64, _: &[&[f32]]) -> Result<Option<Combined>, DistError> {
        Ok(None)
    }
    fn params_agree(&self, _: usize, _: &dyn Fn() -> u64) -> Result<(), DistError> {
        Ok(())
    }
    fn sum_counts(&self, _: &mut [u64]) -> Result<(), DistError> {
        Ok(())
    }
    fn stops(&self, mine: bool) -> Result<bool, DistError> {
        Ok(mine)
    }
    fn gather(&self) -> Result<Option<DistState>, DistError> {
        Ok(None)
    }
}

/// A rank of a distributed job: its transport, its consensus state, its replicas' bytes.
pub struct Ranks<'a> {
    comm: &'a dyn Collective,
    consensus: ConsensusState,
    plan: Distributed,
    replica_bytes: u64,
}

impl<'a> Ranks<'a> {
    /// The rank `dist.comm` of a job training `store` (its part) under `plan`'s consensus;
    /// with `gad`, ζ of the store is computed here, once (seeded by `seed`).
    pub fn new(
        dist: &'a Dist<'a>,
        plan: Distributed,
        store: &GraphStore,
        n_train: usize,
        seed: u64,
    ) -> Ranks<'a> {
        let gad = plan.consensus == Consensus::Gad;
        let importance = if gad {
            super::zeta::store_importance(store, plan.beta, seed).zeta
        } else {
            1.0
        };
        Ranks {
            comm: dist.comm.as_ref(),
            consensus: ConsensusState::new(plan, n_train, importance),
            plan,
            replica_bytes: dist.replica_bytes,
        }
    }
}

impl StepSync for Ranks<'_> {
    fn rank(&self) -> usize {
        self.comm.rank()
    }
    fn ranks(&self) -> usize {
        self.comm.size()
    }
    fn job_name(&self) -> Option<String> {
        Some(format!("this job's {} parts", self.comm.size()))
    }
    fn graph_id(&self, identity: u64) -> Result<u64, DistError> {
        use crate::seed::mix64;
        let mut id = [mix64(identity ^ mix64(self.comm.rank() as u64 + 1))];
        self.comm.allreduce_u64(&mut id, ReduceOp::Sum)?;
        Ok(id[0])
    }
    fn restore(&mut self, saved: Option<&DistState>, path: &Path) -> Result<(), DistError> {
        let (rank, size) = (self.comm.rank(), self.comm.size());
        self.consensus.restore(saved, rank, size, path)
    }
    fn run_info(&self) -> Result<Option<RunDist>, DistError> {
        let mut bytes = [self.replica_bytes];
        self.comm.allreduce_u64(&mut bytes, ReduceOp::Sum)?;
        // Every rank's ζ (a collective call, so every consensus makes it).
        let mut zeta = vec![0u64; self.comm.size()];
        zeta[self.comm.rank()] = self.consensus.importance().to_bits();
        self.comm.allreduce_u64(&mut zeta, ReduceOp::Sum)?;
        Ok(Some(RunDist {
            ranks: self.comm.size(),
            transport: self.comm.name(),
            consensus: self.plan.consensus.name().into(),
            beta: self.plan.beta,
            replica_bytes: bytes[0],
            zeta: if self.plan.consensus == Consensus::Gad {
                zeta.into_iter().map(f64::from_bits).collect()
            } else {
                Vec::new()
            },
        }))
    }
    fn steps(&self, mine: u64) -> Result<u64, DistError> {
        let mut n = [mine];
        self.comm.allreduce_u64(&mut n, ReduceOp::Max)?;
        Ok(n[0])
    }
    fn combine(&mut self, loss: f64, grads: &[&[f32]]) -> Result<Option<Combined>, DistError> {
        self.consensus.combine(self.comm, loss, grads).map(Some)
    }
    fn params_agree(&self, epoch: usize, hash: &dyn Fn() -> u64) -> Result<(), DistError> {
        let h = hash();
        if all_equal(self.comm, h)? {
            return Ok(());
        }
        Err(DistError::Run(format!(
            "distributed: the ranks' parameters differ after epoch {epoch} (rank {}'s hash {h:016x}): a rank applied another update",
            self.comm.rank()
        )))
    }
    fn sum_counts(&self, flat: &mut [u64]) -> Result<(), DistError> {
        self.comm.allreduce_u64(flat, ReduceOp::Sum)
    }
    fn stops(&self, mine: bool) -> Result<bool, DistError> {
        let mut any = [u64::from(mine)];
        self.comm.allreduce_u64(&mut any, ReduceOp::Max)?;
        Ok(any[0] != 0)
    }
    fn gather(&self) -> Result<Option<DistState>, DistError> {
        self.consensus.gather(self.comm).map(Some)
    }
}
