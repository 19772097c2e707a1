//! Node embedding in the GraphVite style (issue 16): DeepWalk, LINE and node2vec as
//! `[embedding]` plans ([`crate::plan::embedding`]), trained on CPU cores over the mapped
//! store.
//!
//! The road of a run: the grid's parts ([`partition`]: degree-guided zig-zag, per-part
//! noise ∝ deg^0.75); samplers fill a pool with the positive samples of random walks
//! ([`walk`], [`pool`]: departure ∝ degree, pairs within distance s, pseudo-shuffled,
//! bucketed by block) while the trainers consume the other pool ([`grid`]: n rounds of n
//! orthogonal blocks, lock-free SGD with the `ops` SGNS kernel); both matrices are mapped
//! files ([`matrix`]), the vertex one the output `.npy` itself, published atomically.
//! [`eval`] scores embeddings (node classification, link prediction). With `--device cuda`
//! (the `cuda` feature) the trainers are a GPU's: [`device`] holds what that path shares
//! with the CPU, `cuda.rs` the GPU side (GraphVite's hybrid system).

#[cfg(feature = "cuda")]
#[path = "cuda.rs"]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "no_cuda.rs"]
pub mod cuda;
pub mod device;
pub mod eval;
pub mod grid;
pub mod matrix;
pub mod partition;
pub mod pool;
pub mod walk;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::plan::embedding::EmbeddingPlan;
use crate::progress::Progress;
use crate::seed::{hash3, stream, unit_f64};
use crate::store::GraphStore;

pub use device::Device;
use grid::{EpisodeStats, Grid, NoTouch, Rows, Sgd, Touch};
use matrix::{MappedMatrix, MatrixIo};
use partition::Parts;
use pool::{Pool, Sampler, CHUNK, SAMPLE_BYTES};
use walk::Walker;

/// Errors of node embedding.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The store.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Walking the graph.
    #[error(transparent)]
    Sample(#[from] crate::sample::SampleError),
    /// The plan file.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// A file operation.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A run or an evaluation that cannot go ahead (the message says why).
    #[error("{0}")]
    Invalid(String),
    /// Reading an `.npy` embedding.
    #[error(transparent)]
    Npy(#[from] crate::npy::NpyError),
    /// Drawing the evaluation's plot.
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    /// The GPU (`--device cuda`): missing driver or compiler, a CUDA call that failed.
    #[error("{0}")]
    Device(String),
    /// Stopped by [`train_interruptible`]'s flag after pool `episode` of `episodes`.
    #[error("interrupted after pool {episode} of {episodes}: no embedding was written")]
    Interrupted {
        /// Pools trained.
        episode: u64,
        /// Pools the run had.
        episodes: u64,
    },
}

impl From<MatrixIo> for EmbedError {
    fn from(e: MatrixIo) -> EmbedError {
        EmbedError::Io {
            path: e.path,
            op: e.op,
            source: e.source,
        }
    }
}

/// Result with [`EmbedError`].
pub type Result<T, E = EmbedError> = std::result::Result<T, E>;

/// How to run an `[embedding]` plan (everything but the plan and the store).
#[derive(Clone, Debug)]
pub struct EmbedOptions {
    /// Seed of walks, negatives and initial rows.
    pub seed: u64,
    /// Workers (None: one per core).
    pub threads: Option<std::num::NonZeroUsize>,
    /// Bytes for the two sample pools together (`--memory`).
    pub memory_bytes: usize,
    /// The `.npy` to publish the vertex matrix to (None: train only).
    pub output: Option<PathBuf>,
    /// Where the context matrix's scratch file goes.
    pub scratch_dir: PathBuf,
    /// Epochs instead of the plan's.
    pub epochs: Option<f64>,
    /// Progress bars or lines.
    pub progress: Progress,
    /// Fraction of edges held out of the walks for link prediction (0: none), chosen by
    /// a hash of (seed, edge) that `eval-embedding --holdout` recomputes.
    pub holdout: f64,
    /// What the memory check compares the matrices and pools with (issue 28;
    /// `MemoryLimit::Off`: `--no-memory-check`, e.g. to run out of core on purpose).
    pub memory_limit: crate::machine::MemoryLimit,
    /// Where the SGD runs (`--device`): the CPU's workers, or a GPU fed by them.
    pub device: Device,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            seed: 1,
            threads: None,
            memory_bytes: 256 << 20,
            output: None,
            scratch_dir: std::env::temp_dir(),
            epochs: None,
            progress: Progress::hidden(),
            holdout: 0.0,
            memory_limit: crate::machine::MemoryLimit::Detect,
            device: Device::Cpu,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EmbedOutcome {
    /// The plan's name.
    pub plan: String,
    /// Nodes and dim of the embedding.
    pub nodes: usize,
    /// Embedding width.
    pub dim: usize,
    /// Positive samples trained.
    pub samples: u64,
    /// Samples per pool (from the memory budget).
    pub pool_samples: usize,
    /// Pools (episodes) trained.
    pub episodes: u64,
    /// Workers.
    pub workers: usize,
    /// Parts n of the n × n grid.
    pub parts: usize,
    /// Wall time of the training, seconds.
    pub seconds: f64,
    /// Positive samples per second.
    pub samples_per_s: f64,
    /// Mean loss of the last episode (on every 16th sample).
    pub last_loss: f64,
    /// Where the SGD ran: "cpu", or the GPU ("cuda:0 (NVIDIA H200, …)").
    pub device: String,
    /// On a GPU: seconds it had no pool to train, waiting for the CPU's samplers (the
    /// first pool's filling included).
    pub gpu_wait_seconds: Option<f64>,
}

/// Trains `plan` on `store`'s full graph and publishes the vertex matrix to
/// `opts.output` when given.
pub fn train(
    plan: &EmbeddingPlan,
    store: &GraphStore,
    opts: &EmbedOptions,
) -> Result<EmbedOutcome> {
    train_touching(plan, store, opts, &NoTouch)
}

/// [`train`] with every row each grid block touches reported to `touch` (tests).
pub fn train_touching(
    plan: &EmbeddingPlan,
    store: &GraphStore,
    opts: &EmbedOptions,
    touch: &impl Touch,
) -> Result<EmbedOutcome> {
    train_with(plan, store, opts, touch, None)
}

/// [`train`] that stops after the pool under way once `flag` is set (the Python package's
/// KeyboardInterrupt): [`EmbedError::Interrupted`], and no output published.
pub fn train_interruptible(
    plan: &EmbeddingPlan,
    store: &GraphStore,
    opts: &EmbedOptions,
    flag: &AtomicBool,
) -> Result<EmbedOutcome> {
    train_with(plan, store, opts, &NoTouch, Some(flag))
}

fn train_with(
    plan: &EmbeddingPlan,
    store: &GraphStore,
    opts: &EmbedOptions,
    touch: &impl Touch,
    interrupt: Option<&AtomicBool>,
) -> Result<EmbedOutcome> {
    let threads = crate::machine::threads_or_cores(opts.threads);
    let pool = crate::exec::rayon_pool(threads)
        .map_err(|e| EmbedError::Invalid(format!("thread pool: {e}")))?;
    pool.install(|| run(plan, store, opts, threads.get(), touch, interrupt))
}

/// Bytes of the vertex and context rows of one block that should stay in a core's L2.
pub const BLOCK_CACHE_BYTES: usize = 1 << 20;

/// The grid's parts n for `workers` workers and an [nodes, dim] embedding on a machine
/// with `memory` bytes (None: unknown): the smallest multiple of the workers whose blocks'
/// rows (a vertex part and a context part, 2·N·d·4/n bytes) fit [`BLOCK_CACHE_BYTES`], so a
/// block's random rows hit L2 instead of L3; at most 8 per worker (past that no block fits
/// anyway on a large graph, and n² buckets and n rounds per episode cost more than they
/// save). A round's n blocks share the workers. When the two matrices take more than half
/// the memory, one part per worker: out of core, each block's burst of rows then pages
/// in and out again before its next turn (Kronecker 22, d = 128, 4 GiB of matrices under
/// a 4 GiB cap: 482 s with 16 parts, 287 s with 2).
pub fn grid_parts(workers: usize, nodes: usize, dim: usize, memory: Option<u64>) -> usize {
    let workers = workers.max(1);
    let bytes = 2 * nodes * dim * std::mem::size_of::<f32>();
    if memory.is_some_and(|m| bytes as u64 > m / 2) {
        return workers;
    }
    let per_worker = bytes.div_ceil(workers * BLOCK_CACHE_BYTES).clamp(1, 8);
    workers * per_worker
}

/// Samples per pool for a budget of `bytes` for two pools: a multiple of [`CHUNK`], at
/// least one chunk.
pub fn pool_samples(bytes: usize) -> usize {
    (bytes / (2 * SAMPLE_BYTES) / CHUNK).max(1) * CHUNK
}

/// Issue 28: the vertex and context matrices (2 × N × d f32) and the two sample pools
/// against the machine's memory, before anything is allocated. The matrices are mapped
/// files and can page out of core, but slowly (docs/bench/embedding.md, "Kronecker 18 vs 22"), and
/// a width far past memory is a mistake far more often than a plan: that takes
/// `--no-memory-check`.
fn check_memory(
    plan: &EmbeddingPlan,
    nodes: usize,
    pool_samples: usize,
    limit: crate::machine::MemoryLimit,
) -> Result<()> {
    use crate::machine::human;
    let Some((limit, source)) = limit.resolve() else {
        return Ok(());
    };
    let matrices = 2 * nodes as u128 * plan.dim as u128 * 4;
    let pools = 2 * pool_samples as u128 * SAMPLE_BYTES as u128;
    if matrices + pools <= u128::from(limit) {
        return Ok(());
    }
    Err(EmbedError::Invalid(format!(
        "embedding.dim = {}: the vertex and context matrices need {} (2 × {nodes} × {} f32) and the sample pools {} (--memory); this machine has {} ({source}); pass --no-memory-check to run out of core anyway (mapped files, slow)",
        plan.dim,
        human(matrices),
        plan.dim,
        human(pools),
        human(u128::from(limit))
    )))
}

fn run(
    plan: &EmbeddingPlan,
    store: &GraphStore,
    opts: &EmbedOptions,
    workers: usize,
    touch: &impl Touch,
    interrupt: Option<&AtomicBool>,
) -> Result<EmbedOutcome> {
    let graph = store.full();
    let nodes = graph.n_nodes();
    let edges = graph.n_entries() / 2;
    if edges == 0 {
        return Err(EmbedError::Invalid(format!(
            "{}: the graph has no edge, so random walks have nothing to sample",
            store.path().display()
        )));
    }
    let epochs = opts.epochs.unwrap_or(plan.epochs);
    let total = (epochs * edges as f64).round().max(1.0) as u64;
    let cap = pool_samples(opts.memory_bytes);
    check_memory(plan, nodes, cap, opts.memory_limit)?;
    let gpu = match opts.device {
        Device::Cpu => None,
        Device::Cuda(k) => Some(cuda::Gpu::open(k)?),
    };
    let nparts = match (plan.grid_parts, &gpu) {
        (0, None) => grid_parts(
            workers,
            nodes,
            plan.dim,
            crate::machine::machine_memory().map(|m| m.0),
        ),
        (0, Some(g)) => g.grid_parts(nodes, plan.dim, cap)?,
        (n, _) => n,
    };
    let parts = Parts::new(graph, nparts, plan.noise_power);
    let walker = Walker::new(graph, plan).hold_out(opts.holdout, opts.seed);
    let sampler = Sampler::new(&walker, plan, &parts, opts.seed);
    let dim = plan.dim;
    let (mut vertex, mut context) = matrices(opts, nodes, dim, gpu.is_some() && nparts == 1)?;
    let seed = opts.seed;
    init_vertex(&mut vertex, dim, seed);
    let sgd = Sgd {
        lr: plan.lr,
        negatives: plan.negatives,
        negative_weight: plan.negative_weight,
        total: total as f64,
    };
    let episodes = total.div_ceil(cap as u64);
    let ticker = opts.progress.ticker(total, "embedding", "samples");
    let start = Instant::now();
    let mut report = |k: u64, stats: &EpisodeStats| -> Result<()> {
        if interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(EmbedError::Interrupted {
                episode: k + 1,
                episodes,
            });
        }
        let loss = stats.loss_sum / stats.loss_count.max(1) as f64;
        let (done, secs) = (
            k * cap as u64 + stats.samples,
            start.elapsed().as_secs_f64(),
        );
        ticker.set_message(format!("episode {}/{episodes}, loss {loss:.4}", k + 1));
        ticker.inc(stats.samples);
        // Issue 28: the whole run's length, as soon as one pool has measured the rate.
        let left = ticker.remaining_seconds();
        if k == 0 && episodes > 1 {
            ticker.println(format!(
                "estimate: {total} samples in {episodes} pools; at the first pool's rate ({} samples/s) about {} (Ctrl-C stops it, publishing nothing)",
                (done as f64 / secs.max(1e-9)).round(),
                crate::progress::duration_text(secs + left)
            ));
        }
        if opts.progress.lines() {
            ticker.println(format!(
                "episode {}/{episodes}  samples {done}  loss {loss:.4}  time {secs:.1}s  left {}",
                k + 1,
                crate::progress::duration_text(left)
            ));
        }
        Ok(())
    };
    let (last_loss, gpu_wait_seconds) = match &gpu {
        None => {
            let grid = Grid {
                parts: &parts,
                vertex: Rows::new(vertex.data_mut(), dim),
                context: Rows::new(context.as_mut().map_or(&mut [], |c| c.data_mut()), dim),
                sgd,
                seed,
                touch,
            };
            let last = train_on_cpu(&grid, &sampler, (total, cap), &mut report)?;
            (last, None)
        }
        Some(g) => {
            let run = cuda::train_pools(
                g,
                &parts,
                &sampler,
                (
                    vertex.data_mut(),
                    context.as_mut().map_or(&mut [], |c| c.data_mut()),
                ),
                (dim, sgd, seed),
                (total, cap),
                &mut report,
                touch,
            )?;
            (run.last_loss, Some(run.wait))
        }
    };
    ticker.finish();
    let seconds = start.elapsed().as_secs_f64();
    drop(context);
    vertex.publish()?;
    Ok(EmbedOutcome {
        plan: plan.name.clone(),
        nodes,
        dim,
        samples: total,
        pool_samples: cap,
        episodes,
        workers,
        parts: nparts,
        seconds,
        samples_per_s: total as f64 / seconds.max(1e-9),
        last_loss,
        device: gpu
            .as_ref()
            .map_or_else(|| "cpu".to_string(), |g| g.describe()),
        gpu_wait_seconds,
    })
}

/// The vertex matrix (the output's `.npy`, or scratch) and the context matrix, which
/// starts at zero; on a GPU that holds it whole (`on_gpu`) it lives there only.
fn matrices(
    opts: &EmbedOptions,
    nodes: usize,
    dim: usize,
    on_gpu: bool,
) -> Result<(MappedMatrix, Option<MappedMatrix>)> {
    let vertex = match &opts.output {
        Some(path) => MappedMatrix::npy_output(
            path,
            &crate::npy::NpyHeader::f32_matrix(nodes, dim).canonical(),
            nodes,
            dim,
        )?,
        None => MappedMatrix::scratch(&opts.scratch_dir, nodes, dim)?,
    };
    let context = if on_gpu {
        None
    } else {
        Some(MappedMatrix::scratch(&opts.scratch_dir, nodes, dim)?)
    };
    Ok((vertex, context))
}

/// word2vec's start: vertex rows uniform in ±0.5/d (context rows are the file's zeros).
fn init_vertex(vertex: &mut MappedMatrix, dim: usize, seed: u64) {
    vertex
        .data_mut()
        .par_chunks_mut(dim.max(1))
        .enumerate()
        .for_each(|(r, row)| {
            for (c, x) in row.iter_mut().enumerate() {
                let h = hash3(seed, stream::EMB_INIT, (r * dim + c) as u64);
                *x = ((unit_f64(h) - 0.5) / dim as f64) as f32;
            }
        });
}

/// The CPU's loop: the samplers fill the next pool while the trainers consume this one,
/// on the same workers (rayon's work stealing interleaves the two). Returns the last
/// pool's mean loss.
fn train_on_cpu<T: Touch>(
    grid: &Grid<'_, T>,
    sampler: &Sampler<'_>,
    (total, cap): (u64, usize),
    report: &mut dyn FnMut(u64, &EpisodeStats) -> Result<()>,
) -> Result<f64> {
    let episodes = total.div_ceil(cap as u64);
    let len_of = |k: u64| (total - k * cap as u64).min(cap as u64) as usize;
    let (mut cur, mut next) = (Pool::default(), Pool::default());
    cur.fill(sampler, 0, len_of(0))?;
    let mut last_loss = f64::NAN;
    for k in 0..episodes {
        let (filled, stats) = rayon::join(
            || {
                if k + 1 < episodes {
                    next.fill(sampler, (k + 1) * cap as u64, len_of(k + 1))
                } else {
                    Ok(())
                }
            },
            || grid.train_pool(&cur, k, k * cap as u64),
        );
        filled?;
        last_loss = stats.loss_sum / stats.loss_count.max(1) as f64;
        report(k, &stats)?;
        std::mem::swap(&mut cur, &mut next);
    }
    Ok(last_loss)
}
