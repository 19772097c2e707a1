//! The crate's error type: one variant per layer, each wrapping that layer's own enum. This
//! module only gathers: every layer defines its errors itself and none imports this one
//! (the layering test checks it), so `Error` is for callers above the layers — the CLI and
//! users of the library.

pub use crate::store::StoreError;

/// Every error saintflow's library returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening, writing, checking or importing a graph store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Sampling subgraphs.
    #[error(transparent)]
    Sample(#[from] crate::sample::SampleError),
    /// Parsing or lowering a plan file.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// An op: registering it, its arguments or attributes, a kernel it ran.
    #[error(transparent)]
    Op(#[from] crate::ir::OpError),
    /// Building, differentiating or planning a step graph.
    #[error(transparent)]
    Ir(#[from] crate::ir::IrError),
    /// Reading training logs or drawing training curves.
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    /// The compile step: a plan lowered and planned for a store (`explain`, `partition
    /// --plan`).
    #[error(transparent)]
    Compile(#[from] crate::compile::CompileError),
    /// Full-graph inference (`embed`).
    #[error(transparent)]
    Infer(#[from] crate::infer::InferError),
    /// Training, evaluation, checkpoints and logs.
    #[error(transparent)]
    Train(#[from] crate::train::TrainError),
    /// Partitioning a store into part stores (`saintflow partition`).
    #[error(transparent)]
    Partition(#[from] crate::dist::PartitionError),
    /// A process's share of a distributed job (`train --partitions`).
    #[error(transparent)]
    Dist(#[from] crate::dist::DistError),
    /// Node embedding: `[embedding]` plans and their evaluation.
    #[error(transparent)]
    Embed(#[from] crate::embedding::EmbedError),
    /// Benchmarks that run the program (`bench scale`; the `bench` feature).
    #[cfg(feature = "bench")]
    #[error(transparent)]
    Bench(#[from] crate::bench::BenchError),
    /// An output refused before anything is written (it would replace an input, a store's
    /// file, a link or a device, or an existing file without `--force`), or a standard
    /// stream that cannot be written.
    #[error(transparent)]
    Output(#[from] crate::atomic::OutputError),
}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
