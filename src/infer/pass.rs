//! The blocked pass itself (issue 54: out of `train/blocked.rs`): [`run_blocked`] makes
//! the pass's [`PassPlan`], computes the static values once, allocates the kept matrices
//! and runs the levels in order, each in chunks (a streamed level's, see `stream`) of
//! blocks of rows; `Pass::block` computes one level's values at rows r0..r1 (a neighbour
//! op through [`NeighbourOp::forward_block`](crate::op::NeighbourOp::forward_block) with
//! the block's adjacency rows built here, normalised by full-graph degrees, and X read in
//! place by global id; row-local ops on the block's rows); kept values are written at
//! their rows, the wanted output goes to the caller's sink, block by block, in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::block::{Block, BlockCache};
use super::kept::{gather_rows, Kept};
use super::levels::{width, AdjKey, BlockedPlan, Class};
use super::plan::{InferOptions, LevelStream, PassPlan};
use super::{InferError, Result};
use crate::exec::interp::op_error;
use crate::ir::recycle::recycle_value;
use crate::ir::{Bindings, Graph, NodeId, Params, SparseMat, Tensor, Value};
use crate::op::{Ctx, GraphSource, Neighbour, NodeRows, RowBlock};
use crate::sample::Subgraph;
use crate::store::GraphStore;

/// The recycled buffers a pass keeps (its blocks' values, a few MiB each).
const PASS_POOL_BYTES: usize = 64 << 20;

/// The last announced plan's decisions ([`PassPlan::decisions`]): each different plan is
/// printed once, not at every evaluation of a run.
static ANNOUNCED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// What every block and chunk of a pass reads: the graph, the analysis, the static values.
pub(super) struct Pass<'a> {
    pub(super) store: &'a GraphStore,
    pub(super) graph: &'a Graph,
    pub(super) plan: &'a BlockedPlan,
    source: &'a dyn GraphSource,
    params: &'a Params,
    pub(super) statics: HashMap<NodeId, Value>,
    pub(super) features: &'a [f32],
    /// The node statistics of this level's ops that have them, folded over x.
    pub(super) stats: HashMap<NodeId, Vec<f64>>,
    /// Parameter-free values of an earlier pass (`Class::Cached`).
    cached: &'a Cache,
    /// Blocks of rows and their adjacencies kept across passes, where the caller keeps
    /// them ([`BlockCache`]).
    blocks: Option<&'a Mutex<BlockCache>>,
}

/// Parameter-free values kept across the passes of one [`FullGraph`](super::FullGraph)
/// (see [`BlockedPlan::constants`]): N-row matrices in memory, by node.
pub(super) type Cache = HashMap<NodeId, Arc<Kept>>;

impl<'a> Pass<'a> {
    pub(super) fn ctx(&self, id: NodeId, b: Bindings) -> Ctx<'_> {
        Ctx {
            source: Some(self.source),
            params: self.params,
            step: 0,
            seed: 0,
            training: false,
            node: id,
            bindings: b,
        }
    }

    pub(super) fn fail(&self, id: NodeId, e: crate::op::OpError) -> InferError {
        op_error(self.graph.node(id), e).into()
    }

    /// The stored entries of the rows `at`.
    fn entries(&self, at: &At<'_>) -> usize {
        let o = self.store.full().offsets();
        match *at {
            At::Range(r0, r1) => (o[r1] - o[r0]) as usize,
            At::Ids(ids) => ids
                .iter()
                .map(|&v| (o[v as usize + 1] - o[v as usize]) as usize)
                .sum(),
        }
    }

    /// A lower level's per-node value, whole (N rows).
    pub(super) fn whole<'k>(
        &'k self,
        kept: &'k HashMap<NodeId, Kept>,
        src: NodeId,
    ) -> (&'k [f32], usize) {
        match self.plan.class[&src] {
            Class::Features => (self.features, width(self.graph, src)),
            Class::Cached => (self.cached[&src].data(), width(self.graph, src)),
            _ => (kept[&src].data(), width(self.graph, src)),
        }
    }

    /// A floating value (see `BlockedPlan::floating`) at rows `own`, computed from the
    /// features there; `memo` holds what is already computed for these rows.
    pub(super) fn local(
        &self,
        id: NodeId,
        own: &[u32],
        memo: &mut HashMap<NodeId, Value>,
    ) -> Result<Value> {
        if let Some(v) = memo.get(&id) {
            return Ok(v.clone());
        }
        let v = match self.plan.class[&id] {
            Class::Static => return Ok(self.statics[&id].clone()),
            Class::Features => {
                Value::dense(gather_rows(self.features, self.store.n_features(), own))
            }
            Class::Cached => Value::dense(gather_rows(
                self.cached[&id].data(),
                width(self.graph, id),
                own,
            )),
            // The rows' nodes, for a row-local op reading their own data (the sparse
            // feature product): no entries (see `RowLocal`).
            Class::Subgraph => Value::Subgraph(Arc::new(Subgraph {
                nodes: own.to_vec(),
                offsets: vec![0; own.len() + 1],
                indices: Vec::new(),
                parent_entries: Vec::new(),
                link: None,
                typed: None,
            })),
            _ => {
                let node = self.graph.node(id);
                let ins = node
                    .inputs
                    .iter()
                    .map(|&src| self.local(src, own, memo))
                    .collect::<Result<Vec<Value>>>()?;
                let refs: Vec<&Value> = ins.iter().collect();
                let b = Bindings {
                    nodes: own.len(),
                    entries: 0,
                    pairs: 0,
                };
                node.op
                    .forward(&refs, &self.ctx(id, b))
                    .map_err(|e| self.fail(id, e))?
            }
        };
        memo.insert(id, v.clone());
        Ok(v)
    }

    /// The inputs of a neighbour op other than its adjacency and X (static values).
    pub(super) fn other_inputs(&self, id: NodeId, nb: Neighbour) -> Vec<Option<&Value>> {
        let node = self.graph.node(id);
        node.inputs
            .iter()
            .enumerate()
            .map(|(i, src)| (i != nb.adjacency && i != nb.x).then(|| &self.statics[src]))
            .collect()
    }

    /// The values of `work` (one level's nodes) at rows r0..r1 (`At::Range`) or at
    /// chosen rows (`At::Ids`: a level without streamed ops whose neighbour ops take any
    /// rows); the streamed ops' rows come from `folded`, their chunk's outputs from row
    /// `c0`.
    fn block(
        &self,
        kept: &HashMap<NodeId, Kept>,
        work: &[NodeId],
        at: At<'_>,
        folded: &HashMap<NodeId, Arc<Tensor>>,
        c0: usize,
    ) -> Result<HashMap<NodeId, Value>> {
        let (graph, plan) = (self.graph, self.plan);
        let n = self.store.n_nodes();
        // The rows' adjacency rows are copied (and checked) only for an op that reads them
        // here: a streamed level's neighbour ops are folded already, and the copy was a
        // tenth of a streamed pass's time.
        let (own, range): (Vec<u32>, _) = match at {
            At::Range(r0, r1) => ((r0 as u32..r1 as u32).collect(), Some((r0, r1))),
            At::Ids(ids) => (ids.to_vec(), None),
        };
        let rows = own.len();
        let r0 = range.map_or(own.first().map_or(0, |&v| v as usize), |r| r.0);
        let r1 = r0 + rows;
        let entries = self.entries(&at);
        let mut block: Option<Arc<Block>> = None;
        let mut adjacency: HashMap<AdjKey, SparseMat> = HashMap::new();
        let mut vals: HashMap<NodeId, Value> = HashMap::new();
        for &id in work {
            let node = graph.node(id);
            let out = match plan.class[&id] {
                // Only as the output itself: a plan whose embedding is the features, or a
                // cached value.
                Class::Features | Class::Cached => self.local(id, &own, &mut HashMap::new())?,
                Class::Neighbour if folded.contains_key(&id) => {
                    let t = &folded[&id];
                    let rows = (r0 - c0)..(r1 - c0);
                    let data = t.data[rows.start * t.cols..rows.end * t.cols].to_vec();
                    Value::dense(Tensor::from_vec(rows.len(), t.cols, data).expect("whole rows"))
                }
                Class::RowLocal => {
                    // Per-node inputs at the block's rows: this level's, gathered from a
                    // kept value, or computed again from the features.
                    let mut ins: Vec<Value> = Vec::new();
                    for &src in &node.inputs {
                        ins.push(match plan.class[&src] {
                            Class::Static => self.statics[&src].clone(),
                            // This level's, or a lower level's computed again here
                            // (`BlockedPlan::deferred`).
                            Class::RowLocal | Class::Neighbour if vals.contains_key(&src) => {
                                vals[&src].clone()
                            }
                            Class::Features => self.local(src, &own, &mut vals)?,
                            _ if !kept.contains_key(&src) => self.local(src, &own, &mut vals)?,
                            _ => {
                                let (data, cols) = self.whole(kept, src);
                                Value::dense(gather_rows(data, cols, &own))
                            }
                        });
                    }
                    let refs: Vec<&Value> = ins.iter().collect();
                    let b = Bindings {
                        nodes: rows,
                        entries,
                        pairs: 0,
                    };
                    match (plan.stats.contains(&id), node.op.as_node_stats()) {
                        (true, Some(ns)) => ns
                            .rows(&self.stats[&id], n, &refs, &self.ctx(id, b))
                            .map_err(|e| self.fail(id, e))?,
                        _ => node
                            .op
                            .forward(&refs, &self.ctx(id, b))
                            .map_err(|e| self.fail(id, e))?,
                    }
                }
                Class::Neighbour | Class::BlockSparse => {
                    let nb = plan.neighbour[&id];
                    let (s, x) = (node.inputs[nb.adjacency], node.inputs[nb.x]);
                    let block = match &mut block {
                        Some(b) => &*b,
                        slot => &*slot.insert(match at {
                            At::Range(r0, r1) => {
                                BlockCache::block(self.blocks, self.store, r0, r1)?
                            }
                            At::Ids(ids) => Arc::new(Block::at(self.store, ids)?),
                        }),
                    };
                    if let Class::Adj(kind) = plan.class[&s] {
                        adjacency.entry(kind).or_insert_with(|| {
                            BlockCache::adjacency(self.blocks, self.store, block, range, kind)
                        });
                    }
                    let a = match plan.class[&s] {
                        Class::Adj(kind) => &adjacency[&kind],
                        _ => vals[&s].as_sparse().ok_or_else(|| {
                            self.fail(id, crate::op::OpError::args("sparse operand expected"))
                        })?,
                    };
                    let (data, cols) = self.whole(kept, x);
                    let inputs = self.other_inputs(id, nb);
                    let rb = RowBlock {
                        r0,
                        ids: block.ids.as_deref(),
                        n_nodes: n,
                        x0: 0,
                        adjacency: a,
                        x: NodeRows::new(data, cols),
                        inputs: &inputs,
                    };
                    let b = Bindings {
                        nodes: rows,
                        entries: a.structure.nnz(),
                        pairs: 0,
                    };
                    node.op
                        .as_neighbour()
                        .ok_or_else(|| {
                            self.fail(id, crate::op::OpError::args("not a neighbour op"))
                        })?
                        .forward_block(&rb, &self.ctx(id, b))
                        .map_err(|e| self.fail(id, e))?
                }
                Class::Static | Class::Subgraph | Class::Adj(_) => {
                    unreachable!("not in a level's work")
                }
            };
            let ok = match plan.class[&id] {
                Class::BlockSparse => {
                    matches!(out.as_sparse(), Some(s) if s.structure.n_rows() == rows)
                }
                _ => matches!(
                    out.as_dense(),
                    Some(t) if t.rows == rows && t.cols == width(graph, id)
                ),
            };
            if !ok {
                return Err(self.fail(
                    id,
                    crate::op::OpError::args(format!(
                        "row-blocked evaluation: expected {} × {} for rows {r0}..{r1}",
                        rows,
                        width(graph, id)
                    )),
                ));
            }
            vals.insert(id, out);
        }
        Ok(vals)
    }
}

/// Evaluates `plan`'s output over the whole store, block by block; `sink(r0, block)` gets
/// rows r0.. of the output in order. The pass's [`PassPlan`] is made first (an error when
/// it cannot work) and printed once through `opts.progress` when the pass is out of core.
#[allow(clippy::too_many_arguments)]
pub fn run_blocked(
    store: &GraphStore,
    graph: &Graph,
    plan: &BlockedPlan,
    source: &dyn GraphSource,
    params: &Params,
    opts: &InferOptions,
    sink: &mut (dyn FnMut(usize, &Tensor) -> Result<()> + Send),
) -> Result<()> {
    let none = Cache::new();
    let mut rows_sink = every_row(sink);
    run_pass(
        store,
        graph,
        plan,
        source,
        params,
        opts,
        &mut rows_sink,
        (&none, &[], None),
        None,
    )?;
    Ok(())
}

/// Levels computed at chosen rows alone in this process (for tests: that the path runs).
static CHOSEN_LEVELS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many passes of this process computed their last layer at chosen rows alone
/// ([`FullGraph::for_each_block_at`](super::FullGraph::for_each_block_at)); for tests.
#[doc(hidden)]
pub fn chosen_row_levels() -> usize {
    CHOSEN_LEVELS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Values computed again at chosen rows instead of kept, over this process's passes.
static DEFERRED_VALUES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many lower-level values the passes of this process at chosen rows computed again
/// there instead of keeping them for every row (`BlockedPlan::at_chosen_rows`); for tests.
#[doc(hidden)]
pub fn deferred_values() -> usize {
    DEFERRED_VALUES.load(std::sync::atomic::Ordering::Relaxed)
}

/// A sink of a pass of every row (its blocks are consecutive: `Rows::From`) as the
/// row-start sink its caller gave.
pub(super) fn every_row<'s>(
    sink: &'s mut (dyn FnMut(usize, &Tensor) -> Result<()> + Send),
) -> impl FnMut(Rows<'_>, &Tensor) -> Result<()> + Send + 's {
    move |rows, t| match rows {
        Rows::From(r0) => sink(r0, t),
        Rows::Ids(_) => unreachable!("a pass of every row"),
    }
}

/// Which rows of the output a block of a pass holds.
#[derive(Clone, Copy, Debug)]
pub enum Rows<'a> {
    /// Rows r0.. (as many as the block has), consecutive.
    From(usize),
    /// These nodes' rows, in order.
    Ids(&'a [u32]),
}

/// Where a block's rows are: consecutive, or chosen.
#[derive(Clone, Copy)]
enum At<'a> {
    Range(usize, usize),
    Ids(&'a [u32]),
}

/// [`run_blocked`] reading the values of `cached` (those `plan` classes
/// `Class::Cached`: made by [`BlockedPlan::with_cached`]) and keeping the values `fill`
/// (of `plan`'s [`BlockedPlan::constants`]) as they are computed: returned, N rows each,
/// for the next passes' cache.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_pass(
    store: &GraphStore,
    graph: &Graph,
    plan: &BlockedPlan,
    source: &dyn GraphSource,
    params: &Params,
    opts: &InferOptions,
    sink: &mut (dyn FnMut(Rows<'_>, &Tensor) -> Result<()> + Send),
    (cached, fill, blocks): (&Cache, &[NodeId], Option<&Mutex<BlockCache>>),
    at: Option<&[u32]>,
) -> Result<Cache> {
    let n = store.n_nodes();
    // Out of core, the training step's recycled buffers go first, and the pass keeps few
    // (a block's values are a few MiB): its buffer is what the memory limit leaves beside
    // what the process holds. The step's cap comes back when the pass ends.
    let _pool = crate::ir::recycle::CapacityGuard::new();
    // At chosen rows, what only they read of lower levels is computed again there
    // instead of kept for every row (`BlockedPlan::at_chosen_rows`), when what that reads
    // fits in memory.
    let deferring = at
        .filter(|_| super::plan::lower_levels_fit(store, graph, plan, opts))
        .and_then(|_| plan.at_chosen_rows(graph, fill));
    if let Some(p) = &deferring {
        DEFERRED_VALUES.fetch_add(p.deferred.len(), std::sync::atomic::Ordering::Relaxed);
    }
    let plan = deferring.as_ref().unwrap_or(plan);
    let pass_plan = announced_plan(store, graph, plan, opts)?;
    let mut pass = Pass {
        store,
        graph,
        plan,
        source,
        params,
        statics: HashMap::new(),
        features: store.features(),
        cached,
        blocks,
        stats: HashMap::new(),
    };
    pass.compute_statics()?;
    let mut kept = allocate_kept(n, graph, &pass_plan, fill)?;
    // The levels with work that is kept or is the output, each with its nodes (a level
    // of floating values alone is computed where it is read).
    let levels: Vec<(usize, Vec<NodeId>)> = (0..plan.levels)
        .map(|l| (l, level_work(graph, plan, &kept, l)))
        .filter(|(_, w)| {
            w.iter()
                .any(|id| kept.contains_key(id) || *id == plan.output)
        })
        .collect();
    // A streamed level counts its rows twice: folded, then computed in blocks.
    let rounds: usize = levels
        .iter()
        .map(|(l, _)| 1 + usize::from(pass_plan.streams.iter().any(|s| s.level == *l)))
        .sum();
    let ticker = opts
        .progress
        .ticker((rounds * n) as u64, "full-graph pass", "rows");
    let (started, read0) = (std::time::Instant::now(), crate::progress::bytes_read());
    for (li, (level, work)) in levels.iter().enumerate() {
        ticker.set_message(format!("layer {}/{}", li + 1, levels.len()));
        let level = Level {
            level: *level,
            work,
            stream: pass_plan.streams.iter().find(|s| s.level == *level),
            block_rows: pass_plan.block_rows,
        };
        pass.fold_stats(&kept, &level);
        match pass.chosen_rows(&kept, &level, at) {
            Some(ids) => pass.run_at_ids(&kept, &level, ids, sink, &ticker)?,
            None => pass.run_in_chunks(&mut kept, &level, sink, &ticker)?,
        }
    }
    if pass_plan.out_of_core() {
        ticker.println(format!(
            "full-graph pass done: {n} nodes in {:.1} s, read {} from disk (planned: {} of features and kept values)",
            started.elapsed().as_secs_f64(),
            crate::machine::human(crate::progress::bytes_read().saturating_sub(read0).into()),
            crate::machine::human(pass_plan.read_bytes.into()),
        ));
    }
    ticker.finish();
    let mut filled = Cache::new();
    for id in fill {
        // A value kept in a scratch file stays there: the pass plan put it on disk.
        if let Some(k @ Kept::Mem(_)) = kept.remove(id) {
            filled.insert(*id, Arc::new(k));
        }
    }
    Ok(filled)
}

/// The pass's plan; out of core, made again once the step's recycled buffers are gone
/// (its buffer is what the memory limit leaves beside the process), and printed once per
/// different plan.
fn announced_plan(
    store: &GraphStore,
    graph: &Graph,
    plan: &BlockedPlan,
    opts: &InferOptions,
) -> Result<PassPlan> {
    let mut pass_plan = PassPlan::new(store, graph, plan, opts)?;
    if pass_plan.out_of_core() {
        crate::ir::recycle::clear();
        crate::ir::recycle::set_capacity(PASS_POOL_BYTES);
        pass_plan = PassPlan::new(store, graph, plan, opts)?;
    }
    if pass_plan.out_of_core() {
        let decisions = pass_plan.decisions();
        let mut last = ANNOUNCED.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_deref() != Some(decisions.as_str()) {
            opts.progress.line(pass_plan.to_string());
            *last = Some(decisions);
        }
    }
    Ok(pass_plan)
}

/// The kept matrices, in memory or in scratch files, and the values for the cache: kept
/// in memory as they are computed, at their level (read back from there by this pass, as
/// a kept value is).
fn allocate_kept(
    n: usize,
    graph: &Graph,
    pass_plan: &PassPlan,
    fill: &[NodeId],
) -> Result<HashMap<NodeId, Kept>> {
    let mut kept: HashMap<NodeId, Kept> = HashMap::new();
    for (k, &(id, cols)) in pass_plan.kept.iter().enumerate() {
        let file = pass_plan
            .scratch
            .as_ref()
            .map(|(dir, _)| dir.join(format!(".saintflow-infer-{}-{k}", std::process::id())));
        kept.insert(id, Kept::new(n, cols, file.as_deref())?);
    }
    for &id in fill {
        if let std::collections::hash_map::Entry::Vacant(e) = kept.entry(id) {
            e.insert(Kept::new(n, width(graph, id), None)?);
        }
    }
    Ok(kept)
}

/// A level's work: what its kept values and the output need of it (a value only a
/// deferred one read is not computed at every row), and at the output's level first the
/// deferred values of lower levels (`BlockedPlan::at_chosen_rows`).
fn level_work(
    graph: &Graph,
    plan: &BlockedPlan,
    kept: &HashMap<NodeId, Kept>,
    level: usize,
) -> Vec<NodeId> {
    let mut need: std::collections::HashSet<NodeId> = plan
        .order
        .iter()
        .copied()
        .filter(|id| plan.level[id] == level && (kept.contains_key(id) || *id == plan.output))
        .collect();
    for &id in plan.order.iter().rev() {
        if need.contains(&id) {
            for &src in &graph.node(id).inputs {
                if plan.level.get(&src) == Some(&level) {
                    need.insert(src);
                }
            }
        }
    }
    let own = plan.order.iter().copied().filter(|id| {
        need.contains(id)
            && (matches!(
                plan.class[id],
                Class::RowLocal | Class::Neighbour | Class::BlockSparse
            ) || *id == plan.output)
    });
    let deferred = (plan.level[&plan.output] == level).then_some(&plan.deferred);
    deferred.into_iter().flatten().copied().chain(own).collect()
}

/// One level of a pass: its number, its nodes, its stream (if it streams X) and the rows
/// of a block.
struct Level<'l> {
    level: usize,
    work: &'l [NodeId],
    stream: Option<&'l LevelStream>,
    block_rows: usize,
}

/// Where a pass's output rows go, block by block.
type Sink<'s> = dyn FnMut(Rows<'_>, &Tensor) -> Result<()> + Send + 's;

impl Pass<'_> {
    /// The static values, once.
    fn compute_statics(&mut self) -> Result<()> {
        for &id in &self.plan.order {
            if self.plan.class[&id] != Class::Static {
                continue;
            }
            let node = self.graph.node(id);
            let ins: Vec<&Value> = node.inputs.iter().map(|i| &self.statics[i]).collect();
            let b = Bindings {
                nodes: 0,
                entries: 0,
                pairs: 0,
            };
            let v = node
                .op
                .forward(&ins, &self.ctx(id, b))
                .map_err(|e| self.fail(id, e))?;
            self.statics.insert(id, v);
        }
        Ok(())
    }

    /// Node statistics of the level's ops: x's rows folded in order, a block at a time
    /// (the same terms in the same order as the in-memory forward's one fold).
    fn fold_stats(&mut self, kept: &HashMap<NodeId, Kept>, level: &Level<'_>) {
        let n = self.store.n_nodes();
        for &id in level.work.iter().filter(|id| self.plan.stats.contains(id)) {
            let ns = self
                .graph
                .node(id)
                .op
                .as_node_stats()
                .expect("classed by its node statistics");
            let x = self.graph.node(id).inputs[0];
            let (data, cols) = self.whole(kept, x);
            let mut acc = ns.start(cols);
            for r0 in (0..n).step_by(level.block_rows.max(1)) {
                let r1 = (r0 + level.block_rows).min(n);
                ns.fold(&mut acc, &data[r0 * cols..r1 * cols], cols);
            }
            self.stats.insert(id, acc);
        }
    }

    /// The output's level at chosen rows only (`at`: the nodes an evaluation scores),
    /// where nothing of it is kept for all rows, it streams nothing, and its neighbour
    /// ops take any rows; otherwise every row (`None`), and the caller picks.
    fn chosen_rows<'i>(
        &self,
        kept: &HashMap<NodeId, Kept>,
        level: &Level<'_>,
        at: Option<&'i [u32]>,
    ) -> Option<&'i [u32]> {
        let (plan, graph) = (self.plan, self.graph);
        at.filter(|_| {
            plan.level[&plan.output] == level.level
                && level.stream.is_none()
                && !kept.keys().any(|id| plan.level[id] == level.level)
                && level.work.iter().all(|&id| match plan.class[&id] {
                    Class::Neighbour | Class::BlockSparse => graph
                        .node(id)
                        .op
                        .as_neighbour()
                        .is_some_and(|nb| nb.any_rows()),
                    _ => true,
                })
        })
    }

    /// The output's level at the rows `ids`, block by block into the sink.
    fn run_at_ids(
        &self,
        kept: &HashMap<NodeId, Kept>,
        level: &Level<'_>,
        ids: &[u32],
        sink: &mut Sink<'_>,
        ticker: &crate::progress::Ticker,
    ) -> Result<()> {
        CHOSEN_LEVELS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let none = HashMap::new();
        for chunk in ids.chunks(level.block_rows.max(1)) {
            let vals = self.block(kept, level.work, At::Ids(chunk), &none, 0)?;
            sink(
                Rows::Ids(chunk),
                vals[&self.plan.output].as_dense().expect("checked dense"),
            )?;
            vals.into_values().for_each(recycle_value);
            ticker.inc(chunk.len() as u64);
        }
        ticker.inc(self.store.n_nodes().saturating_sub(ids.len()) as u64);
        Ok(())
    }

    /// The level at every row: chunk by chunk (a streamed level folds each chunk's
    /// neighbour ops first), block by block within a chunk, the kept values written at
    /// their rows and the output's rows into the sink.
    fn run_in_chunks(
        &self,
        kept: &mut HashMap<NodeId, Kept>,
        level: &Level<'_>,
        sink: &mut Sink<'_>,
        ticker: &crate::progress::Ticker,
    ) -> Result<()> {
        let (n, plan) = (self.store.n_nodes(), self.plan);
        let chunk_rows = level.stream.map_or(n.max(1), |s| s.chunk_rows);
        let (mut c0, mut spare) = (0, super::parted::Spare::default());
        while c0 < n {
            let c1 = (c0 + chunk_rows).min(n);
            let folded = match level.stream {
                Some(s) => self.fold_chunk(kept, (c0, c1), s, &mut spare, ticker)?,
                None => HashMap::new(),
            };
            let mut r0 = c0;
            while r0 < c1 {
                let r1 = (r0 + level.block_rows).min(c1);
                let vals = self.block(kept, level.work, At::Range(r0, r1), &folded, c0)?;
                for (&id, k) in kept.iter_mut() {
                    if plan.level[&id] == level.level {
                        let t = vals[&id].as_dense().expect("checked dense");
                        k.write(r0 * t.cols, &t.data)?;
                    }
                }
                if plan.level[&plan.output] == level.level {
                    sink(
                        Rows::From(r0),
                        vals[&plan.output].as_dense().expect("checked dense"),
                    )?;
                }
                vals.into_values().for_each(recycle_value);
                ticker.inc((r1 - r0) as u64);
                r0 = r1;
            }
            c0 = c1;
        }
        Ok(())
    }
}
