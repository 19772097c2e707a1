//! Everything distributed, in one wing (issue 24): a distributed job is several ranks, each
//! training the plan on its own part of the graph with the ordinary engine and agreeing on
//! every step's update.
//!
//! * [`partition`]: cutting a store into parts (multilevel k-way) and augmenting each part by
//!   GAD's boundary walks, one store per rank (`saintflow partition`).
//! * [`job`]: one rank's share of a job read back from a partition directory
//!   ([`DistJob::from_partitions`]): which store it trains, what rank 0 evaluates on, every
//!   check that the stores are the partition's own. The CLI only calls it.
//! * [`collective`]: the [`Collective`] trait all collective calls go through, and
//!   [`ThreadGroup`], ranks as threads of one process; `mpi`: the MPI transport (the `mpi`
//!   feature).
//! * [`consensus`]: how the ranks' gradients are combined (GAD's Eq. 15 with the weights of
//!   `consensus = "gad" | "loss_variance" | "mean"`), and [`zeta`]: GAD's subgraph importance
//!   ζ (Eq. 14).
//! * [`sync`]: every collective call of a training run, in one file and in the order the
//!   ranks make them: [`StepSync`], [`Local`] alone or [`Ranks`] in a job.
//!
//! The wing sits above the engine (store, sampling, plans) and below training, which takes a
//! [`Dist`] in its options; docs/DISTRIBUTED.md maps GAD's pipeline onto it.

pub mod collective;
pub mod consensus;
pub mod job;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod partition;
pub mod sync;
pub mod zeta;

use std::path::PathBuf;

pub use collective::{all_equal, Collective, ReduceOp, ThreadGroup, ThreadRank};
pub use consensus::{Combined, ConsensusState, DistState};
pub use job::{Dist, DistEval, DistJob, JobEval};
pub use partition::PartitionError;
pub use sync::{evaluation, step_sync, EvalOn, Local, Ranks, StepSync};

/// What went wrong in the distributed part of a run. Its messages are the ones the training
/// errors carried before the wing (a collective failure reads "training: distributed: …"),
/// and [`crate::train::TrainError`] takes each back as its own variant.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// A collective call or the consensus failed (a rank ended, the ranks disagree).
    #[error("training: {0}")]
    Run(String),
    /// A checkpoint that a distributed run cannot continue.
    #[error("{}: checkpoint: {what}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The partition directory or one of its stores.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// Opening a rank's store or the evaluation graph.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}
