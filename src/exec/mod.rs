//! Running a step's DAG: [`interp`], the sequential reference interpreter (nodes in
//! topological order, values freed after their last use), and [`executor`], the
//! work-stealing executor on a [`pool`] of workers, tested against it; [`prefetch`] samples
//! the next steps' subgraphs on the same pool while a step computes.

pub mod executor;
pub mod gradcheck;
pub mod interp;
pub mod pool;
pub mod prefetch;
pub mod timeline;

pub use executor::Executor;
pub use gradcheck::{check_gradients, Discrepancy, GradCheck};
pub use interp::{run, Interpreter, StageTimes, StepInput, StepRunner, StepValues};
pub use pool::{Pool, Scope};
pub use prefetch::Prefetch;
pub use timeline::{Span, SpanKind, Timeline};

/// A rayon pool of exactly `threads` workers: where training and full-graph inference run,
/// the executor and the planner told the same count (`machine::threads_or_cores` resolves
/// a caller's `None`).
pub fn rayon_pool(
    threads: std::num::NonZeroUsize,
) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.get())
        .build()
}
