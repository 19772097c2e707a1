//! Benchmarks that run the whole program: [`scale`] (JPDC Fig. 5, step time against |V|
//! and degree under a memory cap), what `saintflow bench` calls.

pub mod scale;

use std::path::PathBuf;

/// Errors of the benchmarks (a store or plan error inside a run is the run's own).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Generating or opening a store of the series.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Reading a run's log or drawing the figure.
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    /// A file operation failed.
    #[error("bench scale: {}: cannot {op}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What we were doing.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A run's process could not be started.
    #[error("bench scale: cannot start {}: {source}", program.display())]
    Spawn {
        /// The program (memcap or the saintflow binary).
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A run exited with an error.
    #[error("bench scale: the run on {} failed ({status}):\n{stderr}", store.display())]
    RunFailed {
        /// The store it trained on.
        store: PathBuf,
        /// Its exit status.
        status: String,
        /// Its standard error.
        stderr: String,
    },
    /// A run's log has no step records.
    #[error("bench scale: {}: no step records", log.display())]
    NoSteps {
        /// The log.
        log: PathBuf,
    },
}
