//! Full-graph inference, a wing of its own below training (issue 54): the plan's forward
//! pass (dropout off) over the whole stored graph — not a sample — for validation and
//! test metrics and for node embeddings.
//!
//! Evaluation follows GraphSAINT: whatever graph training sampled from (the training graph
//! in the inductive setting), inference runs on the full graph, with the adjacency
//! flavours normalised by full-graph degrees and no sampling coefficients (`A_saint`
//! becomes D⁻¹A).
//!
//! Two ways, one result: the blocked pass evaluates layer by layer in blocks of rows with
//! memory bounded by a block, a buffer and the model, not by the graph (the default, used
//! whenever every op of the plan allows it); otherwise the whole graph is one
//! [`Subgraph`](crate::sample::Subgraph) of a [`FullSampler`] run through the
//! [`StepRunner`] in one piece (N × width f32 per live value), nodes in id order so row i
//! is node i. Either way results reach the caller in row blocks
//! ([`FullGraph::for_each_block`]): metrics are counted and embeddings written to an
//! `.npy` ([`NpyWriter`]) block by block.
//!
//! The blocked pass, in effect a second executor, is split along its own parts:
//!
//! * [`levels`]: the analysis, [`BlockedPlan`] (the forward graph cut into levels at its
//!   neighbour ops; which values are kept between levels, which float);
//! * [`mod@plan`]: [`InferOptions`] and [`PassPlan`] (what a pass will keep, where, the buffer
//!   X is streamed through, the bytes to read and write; refused when it cannot work);
//! * `kept`: the N-row matrices kept between levels, in memory or in scratch files;
//! * `pass`: [`run_blocked`], the pass itself, level by level in blocks of rows;
//! * `stream`: a streamed level's chunk, X read in parts of rows.
//!
//! [`metrics`] counts a node's logits against the store's labels; [`hops`] measures a
//! plan's receptive field (`partition --plan`'s walk length).
//!
//! Layering: over [`crate::compile`] (lowering for a store, the memory check) and the
//! engine below it; training ([`crate::train`]) evaluates through [`FullGraph`] and turns
//! [`InferError`] into its own error, each variant worded as before the wing.

mod ahead;
mod block;
pub mod hops;
mod kept;
pub mod levels;
pub mod link;
pub mod metrics;
mod parted;
mod pass;
pub mod plan;
mod stream;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::compile::CompileError;
use crate::exec::StepInput;
use crate::exec::StepRunner;
use crate::ir::{Bindings, Graph, NodeId, Params, Tensor};
use crate::metrics::{Counts, Metrics};
use crate::npy::NpyWriter;
use crate::op::{Registry, StoreSource};
use crate::plan::{Lowered, Plan};
use crate::planner::{plan, PlanOptions};
use crate::sample::FullSampler;
use crate::store::{GraphStore, Role};
use metrics::add_node;

pub use hops::{plan_hops, receptive_field};
pub use levels::BlockedPlan;
pub use pass::{chosen_row_levels, deferred_values, run_blocked, Rows};
pub use plan::{InferOptions, PassPlan};

/// Result with full-graph inference's [`InferError`].
pub type Result<T, E = InferError> = std::result::Result<T, E>;

/// Errors of full-graph inference: its own, and those of the layers it drives. Each
/// variant words its message as training did before inference was a wing of its own
/// (issue 54), and [`TrainError`](crate::train::TrainError) takes each back as its own
/// variant.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// The store (a corrupt section read by a block).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Typing or lowering the plan (the memory check's refusal among them).
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// Building, planning or running the forward graph.
    #[error(transparent)]
    Ir(#[from] crate::ir::IrError),
    /// The compile step (lowering the plan for the store).
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// A file operation failed (a scratch file).
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What we were doing.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Disk space for an output or a scratch file could not be reserved (checked before
    /// any work, so a full disk never shows up half-way).
    #[error(transparent)]
    Space(#[from] crate::atomic::NoSpace),
    /// Writing an `.npy` output (embeddings).
    #[error(transparent)]
    Npy(#[from] crate::npy::NpyError),
    /// The pass itself went wrong (no dense output, a thread pool, scratch space).
    #[error("full-graph inference: {0}")]
    Infer(String),
    /// A planned graph that lost an output (worded as training words it).
    #[error("training: {0}")]
    Run(String),
}

impl InferError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, op: &'static str, source: std::io::Error) -> InferError {
        InferError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }
}

/// Which per-node output of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The logits, `[N, C]`.
    Logits = 0,
    /// The `[output]` layer's input, `[N, width]`.
    Embedding = 1,
}

/// The forward pass of a lowered plan over a store's full graph.
pub struct FullGraph<'g> {
    store: &'g GraphStore,
    source: StoreSource<'g>,
    graph: Graph,
    logits: (NodeId, std::result::Result<BlockedPlan, String>),
    embedding: (NodeId, std::result::Result<BlockedPlan, String>),
    /// Each output's pass reading its parameter-free values from `cache`.
    cached_plans: [Option<BlockedPlan>; 2],
    opts: InferOptions,
    /// Whether passes keep their parameter-free values for the next ones
    /// ([`FullGraph::keep_constants`]).
    keep: bool,
    cache: std::sync::Mutex<CacheState>,
    /// With `keep`: the passes' row blocks and their adjacencies, when they fit
    /// ([`FullGraph::keeps_blocks`]).
    blocks: std::sync::Mutex<block::BlockCache>,
}

/// The parameter-free values of a [`FullGraph`]'s passes, and the outputs whose values
/// could not all be kept (a scratch file): those passes compute them every time.
#[derive(Default)]
struct CacheState {
    values: pass::Cache,
    refused: [bool; 2],
}

impl<'g> FullGraph<'g> {
    /// Plans `lowered`'s graph for the full graph's size (N nodes, its entries) on
    /// `threads` workers (the runner's) and analyses it for blocked evaluation.
    pub fn new(
        store: &'g GraphStore,
        lowered: &Lowered,
        threads: std::num::NonZeroUsize,
    ) -> Result<FullGraph<'g>> {
        let full = store.full();
        let source = StoreSource::new(
            store,
            Box::new(FullSampler::new(full)),
            0,
            1,
            None,
            Role::Val,
        );
        let mut graph = lowered.graph.clone();
        graph.set_output("embedding", lowered.embedding);
        // Planned as what it evaluates: the forward to these two, not the gradients (the
        // fusion pass weighs how long each value lives, and the backward's readers would
        // make the forward's values look long-lived anyway).
        graph.retain_outputs(|name| name == "logits" || name == "embedding");
        plan(
            &mut graph,
            &PlanOptions::new(
                Bindings {
                    nodes: full.n_nodes(),
                    entries: full.n_entries(),
                    pairs: 0,
                },
                threads,
            )
            .with_precision(lowered.precision)
            // The features read sparse where the step reads them so (issue 53 item 7):
            // a dense X·W of Cora's 1,433 columns was most of an APPNP evaluation.
            .with_store_densities(store),
        )?;
        let find = |name: &str| {
            graph.output(name).ok_or_else(|| {
                InferError::Run(format!("the planned graph lost its `{name}` output"))
            })
        };
        let (logits, embedding) = (find("logits")?, find("embedding")?);
        let (logits, embedding) = (
            (logits, BlockedPlan::new(&graph, logits)),
            (embedding, BlockedPlan::new(&graph, embedding)),
        );
        let cached_plan = |(id, bp): &(NodeId, std::result::Result<BlockedPlan, String>)| {
            let constants: HashSet<NodeId> =
                bp.as_ref().ok()?.constants().iter().copied().collect();
            if constants.is_empty() {
                return None;
            }
            BlockedPlan::with_cached(&graph, *id, &constants).ok()
        };
        let cached_plans = [cached_plan(&logits), cached_plan(&embedding)];
        Ok(FullGraph {
            store,
            source,
            logits,
            embedding,
            cached_plans,
            graph,
            opts: InferOptions::default(),
            keep: false,
            blocks: Default::default(),
            cache: Default::default(),
        })
    }

    /// The planned forward graph (its `logits` and `embedding` outputs).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Uses `opts` for blocked evaluation (block size, memory, scratch directory).
    pub fn with_options(mut self, opts: InferOptions) -> FullGraph<'g> {
        self.opts = opts;
        self
    }

    /// With `keep`, a blocked pass keeps the parameter-free values its output reads
    /// ([`BlockedPlan::constants`]: SGC's Â^K·X) in memory, and the next passes read them
    /// instead of computing them: they are computed once per run, not once per evaluation
    /// (issue 53 item 7). The same bits either way. Kept only when together they take at
    /// most half of [`InferOptions::memory_bytes`]; off by default (a single pass, as
    /// `embed`'s, would only hold them longer).
    pub fn keep_constants(mut self, keep: bool) -> FullGraph<'g> {
        self.keep = keep;
        self
    }

    fn output(&self, which: Output) -> &(NodeId, std::result::Result<BlockedPlan, String>) {
        match which {
            Output::Logits => &self.logits,
            Output::Embedding => &self.embedding,
        }
    }

    /// Whether passes keep their row blocks and adjacencies for the next ones: with
    /// [`FullGraph::keep_constants`], when the full graph's rows and an entry array per
    /// adjacency `plan` builds (4 B an index, 4 a value) take at most a quarter of
    /// [`InferOptions::memory_bytes`]. The same bits either way.
    fn keeps_blocks(&self, plan: &BlockedPlan) -> bool {
        let flavours = plan.adjacency_keys();
        let entries = self.store.full().n_entries() as u128 + self.store.n_nodes() as u128;
        self.keep && entries * 4 * (1 + 2 * flavours as u128) <= self.opts.memory_bytes as u128 / 4
    }

    /// Row blocks kept for the next passes ([`FullGraph::keep_constants`]); for tests.
    #[doc(hidden)]
    pub fn kept_blocks(&self) -> usize {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The bytes of `which`'s parameter-free values, were they kept (0: none to keep).
    pub fn constant_bytes(&self, which: Output) -> usize {
        self.output(which).1.as_ref().map_or(0, |bp| {
            bp.constants()
                .iter()
                .map(|&id| 4 * self.store.n_nodes() * levels::width(&self.graph, id))
                .sum()
        })
    }

    /// Whether `which`'s next pass reads its parameter-free values from the cache.
    pub fn reads_cached(&self, which: Output) -> bool {
        let Ok(bp) = &self.output(which).1 else {
            return false;
        };
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        self.cached_plans[which as usize].is_some()
            && bp
                .constants()
                .iter()
                .all(|id| cache.values.contains_key(id))
    }

    /// The plan of `which`'s row-blocked pass with this graph's options (see
    /// [`PassPlan`]): an error when the pass cannot work, or when `which` is evaluated in
    /// memory.
    pub fn pass_plan(&self, which: Output) -> Result<PassPlan> {
        match &self.output(which).1 {
            Ok(bp) => PassPlan::new(self.store, &self.graph, bp, &self.opts),
            Err(why) => Err(InferError::Infer(format!(
                "evaluated in memory, not row-blocked: {why}"
            ))),
        }
    }

    /// Why `which` is evaluated in memory rather than in blocks (None: it is blocked).
    pub fn in_memory_reason(&self, which: Output) -> Option<&str> {
        self.output(which).1.as_ref().err().map(String::as_str)
    }

    /// Columns of `which`.
    pub fn width(&self, which: Output) -> usize {
        let id = self.output(which).0;
        self.graph
            .fact(id)
            .matrix()
            .and_then(|(_, c)| c.as_known())
            .unwrap_or(0)
    }

    /// Computes `which` for every node and hands it to `sink(r0, rows)` in row blocks, in
    /// order, blocked when the plan allows (on a rayon pool of `runner.threads()`
    /// threads), else in one piece through `runner`.
    pub fn for_each_block(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        which: Output,
        sink: &mut (dyn FnMut(usize, &Tensor) -> Result<()> + Send),
    ) -> Result<()> {
        self.blocks(runner, params, which, None, &mut pass::every_row(sink))
    }

    /// Computes `which` at the nodes `ids` (ascending, distinct) and hands it to
    /// `sink(ids, rows)` in blocks, in order: what an evaluation that scores some nodes
    /// needs. The last layer is computed at those rows alone when the plan allows (no
    /// value of it kept, no streamed input, its neighbour ops taking any rows:
    /// [`NeighbourOp::any_rows`](crate::op::NeighbourOp::any_rows)); the layers below it
    /// at every row, as their outputs are read at the neighbours. The values are those of
    /// [`for_each_block`](Self::for_each_block) at the same rows, bit for bit.
    pub fn for_each_block_at(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        which: Output,
        ids: &[u32],
        sink: &mut (dyn FnMut(&[u32], &Tensor) -> Result<()> + Send),
    ) -> Result<()> {
        debug_assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ascending, distinct ids"
        );
        self.blocks(
            runner,
            params,
            which,
            Some(ids),
            &mut |rows, t| match rows {
                Rows::Ids(chunk) => sink(chunk, t),
                Rows::From(r0) => {
                    // A block of every row: the chosen ones in it, gathered.
                    let lo = ids.partition_point(|&v| (v as usize) < r0);
                    let hi = ids.partition_point(|&v| (v as usize) < r0 + t.rows);
                    let mine = &ids[lo..hi];
                    if mine.is_empty() {
                        return Ok(());
                    }
                    let local: Vec<u32> = mine.iter().map(|&v| v - r0 as u32).collect();
                    sink(mine, &kept::gather_rows(&t.data, t.cols, &local))
                }
            },
        )
    }

    fn blocks(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        which: Output,
        at: Option<&[u32]>,
        sink: &mut (dyn FnMut(Rows<'_>, &Tensor) -> Result<()> + Send),
    ) -> Result<()> {
        let blocked = &self.output(which).1;
        match blocked {
            Ok(bp) => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(runner.threads().max(1))
                    .build()
                    .map_err(|e| InferError::Infer(format!("thread pool: {e}")))?;
                // The cache's values (shared), or those to keep from this pass.
                let k = which as usize;
                let (values, refused) = {
                    let c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                    (c.values.clone(), c.refused[k])
                };
                let keeps = self.keep
                    && !refused
                    && self.cached_plans[k].is_some()
                    && self.constant_bytes(which) <= self.opts.memory_bytes / 2;
                let (plan, fill): (&BlockedPlan, Vec<NodeId>) = match &self.cached_plans[k] {
                    Some(cp)
                        if keeps && bp.constants().iter().all(|id| values.contains_key(id)) =>
                    {
                        (cp, Vec::new())
                    }
                    _ if keeps => (bp, bp.constants().to_vec()),
                    _ => (bp, Vec::new()),
                };
                let filled = pool.install(|| {
                    pass::run_pass(
                        self.store,
                        &self.graph,
                        plan,
                        &self.source,
                        params,
                        &self.opts,
                        sink,
                        (
                            &values,
                            &fill,
                            self.keeps_blocks(bp).then_some(&self.blocks),
                        ),
                        at,
                    )
                })?;
                if !fill.is_empty() {
                    let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                    c.refused[k] = filled.len() < fill.len();
                    if !c.refused[k] {
                        c.values.extend(filled);
                    }
                }
                Ok(())
            }
            Err(_) => {
                let t = self.in_memory(runner, params, which)?;
                sink(Rows::From(0), &t)
            }
        }
    }

    /// `which` for every node in one piece through `runner` (the whole graph as one
    /// subgraph): the reference the blocked pass is tested against.
    pub fn in_memory(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        which: Output,
    ) -> Result<Tensor> {
        let node = self.output(which).0;
        let mut v =
            runner.run_step(StepInput::new(&self.graph, &[node], params).source(&self.source))?;
        let t = v
            .take(node)
            .and_then(|x| x.as_dense().cloned())
            .ok_or_else(|| InferError::Infer("the full-graph pass gave no dense output".into()))?;
        Ok(t)
    }

    fn collect(&self, runner: &dyn StepRunner, params: &Params, which: Output) -> Result<Tensor> {
        let cols = self.width(which);
        let mut all = Tensor::zeros(self.store.n_nodes(), cols);
        self.for_each_block(runner, params, which, &mut |r0, t| {
            all.data[r0 * cols..(r0 + t.rows) * cols].copy_from_slice(&t.data);
            Ok(())
        })?;
        Ok(all)
    }

    /// The logits of every node, `[N, C]`, in memory.
    pub fn logits(&self, runner: &dyn StepRunner, params: &Params) -> Result<Tensor> {
        self.collect(runner, params, Output::Logits)
    }

    /// The embedding of every node (the `[output]` layer's input), `[N, width]`, in memory.
    pub fn embedding(&self, runner: &dyn StepRunner, params: &Params) -> Result<Tensor> {
        self.collect(runner, params, Output::Embedding)
    }

    /// Metrics of the nodes of each of `roles`, counted block by block.
    pub fn metrics(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        roles: &[Role],
    ) -> Result<Vec<Metrics>> {
        Ok(self
            .counts(runner, params, roles)?
            .iter()
            .map(Counts::metrics)
            .collect())
    }

    /// The per-class counts behind [`metrics`](Self::metrics), one per role.
    pub fn counts(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        roles: &[Role],
    ) -> Result<Vec<Counts>> {
        let classes = self.width(Output::Logits);
        let labels = self.store.labels();
        let mut counts: Vec<Counts> = roles.iter().map(|_| Counts::new(classes)).collect();
        // Only the nodes of these roles are scored: the last layer is computed there.
        let ids = self.store.nodes_with_roles(roles);
        self.for_each_block_at(runner, params, Output::Logits, &ids, &mut |ids, t| {
            for (i, &v) in ids.iter().enumerate() {
                let role = self.store.role(v);
                if let Some(k) = roles.iter().position(|&r| r == role) {
                    add_node(&mut counts[k], &labels, v, t.row(i));
                }
            }
            Ok(())
        })?;
        Ok(counts)
    }

    /// Writes every node's embedding to `path` as `.npy`, block by block through a map,
    /// atomically. Returns its shape.
    pub fn write_output(
        &self,
        runner: &dyn StepRunner,
        params: &Params,
        which: Output,
        path: &Path,
    ) -> Result<(usize, usize)> {
        let (rows, cols) = (self.store.n_nodes(), self.width(which));
        let mut w = NpyWriter::create(path, rows, cols)?;
        self.for_each_block(runner, params, which, &mut |r0, t| {
            Ok(w.write_rows(r0, &t.data)?)
        })?;
        w.finish()?;
        Ok((rows, cols))
    }
}

/// What [`embed`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Embedded {
    /// Rows (every node of the store).
    pub rows: usize,
    /// Columns (the `[output]` layer's input width, or the classes for logits).
    pub cols: usize,
    /// Why the graph was evaluated in memory in one piece rather than in row blocks
    /// (a custom op that is not row-local), if it was.
    pub in_memory: Option<String>,
}

/// The embedding of every node of `store` (the input of `plan`'s `[output]` layer, or with
/// [`Output::Logits`] the logits) with `params`, the plan's op names made from `registry`,
/// written to `path` as an `[N, width]` f32 `.npy` (row blocks as `opts` allows,
/// atomically).
#[allow(clippy::too_many_arguments)]
pub fn embed(
    store: &GraphStore,
    plan: &Plan,
    registry: &Registry,
    params: &Params,
    runner: &dyn StepRunner,
    opts: InferOptions,
    which: Output,
    path: &Path,
) -> Result<Embedded> {
    let lowered = crate::compile::lower_for(plan, store, registry)?;
    // Parameters only: blocked evaluation's own memory is bounded by `opts.memory_bytes`.
    if let Some((limit, source)) = opts.memory_limit.resolve() {
        let est = crate::compile::memory::estimate(&lowered, None, store, &[])?;
        crate::compile::memory::check(plan, &lowered, &est, limit, &source)?;
    }
    let threads =
        std::num::NonZeroUsize::new(runner.threads()).unwrap_or(std::num::NonZeroUsize::MIN);
    let full = FullGraph::new(store, &lowered, threads)?.with_options(opts);
    let in_memory = full.in_memory_reason(which).map(str::to_string);
    let (rows, cols) = full.write_output(runner, params, which, path)?;
    Ok(Embedded {
        rows,
        cols,
        in_memory,
    })
}
