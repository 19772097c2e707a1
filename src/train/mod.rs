//! Training: the loop ([`trainer`], with its state and observer), checkpoints
//! ([`checkpoint`], [`export`]) and the JSON-lines log ([`log`]). The loop alone (issue 54):
//! a plan is lowered and planned for a store by [`crate::compile`] (and the memory check
//! is there), validation and test metrics come from full-graph inference
//! ([`crate::infer`]), a wing of its own.
//!
//! Everything runs through a [`StepRunner`](crate::exec::StepRunner), so the reference
//! interpreter and the work-stealing executor train the same way. A run is reproducible
//! for a seed and a thread count: subgraph i depends on (seed, i), dropout on (seed, step,
//! node, element), parameters start from (seed, name); a checkpoint holds the rest of the
//! state, so a resumed run computes the same losses as an uninterrupted one.

pub mod checkpoint;
pub mod eval_checkpoint;
mod evaluate;
pub mod export;
pub mod log;
mod observer;
mod state;
pub mod trainer;

use std::path::{Path, PathBuf};

pub use crate::machine::MemoryLimit;
pub use crate::metrics::{Counts, Metrics};
pub use checkpoint::Checkpoint;
pub use eval_checkpoint::{evaluate_checkpoint, CheckpointEval, EvalCheckpoint};
pub use log::{LogSink, Record, RunDist, StepMs};
pub use trainer::{store_bytes, train, TrainOptions, TrainOutcome, Verify, AUTO_VERIFY_BYTES};

/// Result with the training layer's [`TrainError`].
pub type Result<T, E = TrainError> = std::result::Result<T, E>;

/// Errors of the training layer: its own, and those of the layers it drives (each shown as
/// that layer words it).
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The store (opening, reading rows, a corrupt section).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Sampling subgraphs.
    #[error(transparent)]
    Sample(#[from] crate::sample::SampleError),
    /// Typing or lowering the plan.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// Building, planning or running the step graph.
    #[error(transparent)]
    Ir(#[from] crate::ir::IrError),
    /// A file operation failed.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What we were doing.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Initial weights (`--init-from`) that do not fit the plan.
    #[error("{}: --init-from: {what}", path.display())]
    Init {
        /// The weights file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Stopped by [`trainer::TrainOptions::interrupt`]'s flag before step `step`.
    #[error("interrupted in epoch {epoch} before step {step}: the checkpoint holds the last whole epoch")]
    Interrupted {
        /// The epoch under way.
        epoch: usize,
        /// The step not run.
        step: u64,
    },
    /// A checkpoint that cannot be used.
    #[error("{}: checkpoint: {what}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A log file that cannot be continued.
    #[error("{}: log: {what}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Disk space for an output or a scratch file could not be reserved (checked before
    /// any work, so a full disk never shows up half-way).
    #[error(transparent)]
    Space(#[from] crate::atomic::NoSpace),
    /// Writing an `.npy` output (embeddings).
    #[error(transparent)]
    Npy(#[from] crate::npy::NpyError),
    /// Full-graph inference went wrong.
    #[error("full-graph inference: {0}")]
    Infer(String),
    /// The run itself went wrong (a loss that is not finite, an optimiser error, a plan
    /// whose outputs are missing).
    #[error("training: {0}")]
    Run(String),
}

/// The compile step's errors as training's own: the same variants and messages as before
/// it moved below training (issue 54).
impl From<crate::compile::CompileError> for TrainError {
    fn from(e: crate::compile::CompileError) -> TrainError {
        use crate::compile::CompileError;
        match e {
            CompileError::Sample(e) => TrainError::Sample(e),
            CompileError::Plan(e) => TrainError::Plan(e),
            CompileError::Ir(e) => TrainError::Ir(e),
            CompileError::Run(what) => TrainError::Run(what),
        }
    }
}

/// Full-graph inference's errors as training's own: the same variants and messages as
/// before inference was a wing of its own (issue 54).
impl From<crate::infer::InferError> for TrainError {
    fn from(e: crate::infer::InferError) -> TrainError {
        use crate::infer::InferError;
        match e {
            InferError::Store(e) => TrainError::Store(e),
            InferError::Plan(e) => TrainError::Plan(e),
            InferError::Ir(e) => TrainError::Ir(e),
            InferError::Compile(e) => e.into(),
            InferError::Io { path, op, source } => TrainError::Io { path, op, source },
            InferError::Space(e) => TrainError::Space(e),
            InferError::Npy(e) => TrainError::Npy(e),
            InferError::Infer(what) => TrainError::Infer(what),
            InferError::Run(what) => TrainError::Run(what),
        }
    }
}

/// The distributed wing's errors as training's own: the same variants and messages as
/// before the wing (issue 24).
impl From<crate::dist::DistError> for TrainError {
    fn from(e: crate::dist::DistError) -> TrainError {
        use crate::dist::DistError;
        match e {
            DistError::Run(what) => TrainError::Run(what),
            DistError::Checkpoint { path, what } => TrainError::Checkpoint { path, what },
            DistError::Store(e) => TrainError::Store(e),
            DistError::Partition(e) => TrainError::Run(e.to_string()),
        }
    }
}

impl TrainError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, op: &'static str, source: std::io::Error) -> TrainError {
        TrainError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }
}
