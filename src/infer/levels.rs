//! Blocked inference's analysis (issue 54: out of `train/blocked.rs`): the planned forward
//! graph cut into levels, each value classified (`Class`) and its level set;
//! [`BlockedPlan`] holds the result, and says which values are kept between levels and
//! which float.
//!
//! The planned forward graph is cut into *levels* at its neighbour ops
//! ([`NeighbourOp`](crate::op::NeighbourOp): `spmm(S, X)`, `gat(A, z, …)`, a user's
//! aggregation). A value's level is the number of neighbour hops between it and the
//! features: the features are level 0 (they are the store's mapped file); a row-local op
//! ([`RowLocal`](crate::op::RowLocal): row i of its output needs row i of its
//! inputs) has its inputs' level; a neighbour op needs X at every neighbour of a row, so
//! it sits one level above X (and at its sparse operand's level when that is a neighbour
//! op's output, as attention's α is). A value read at a higher level than its own is
//! *kept*: written, row block by row block, into an N-row matrix — in memory when all
//! kept values fit [`InferOptions::memory_bytes`](super::InferOptions::memory_bytes),
//! otherwise in an unlinked temporary file (its blocks reserved with `fallocate`, so a
//! full disk is an error before anything runs) written with positioned writes and read
//! through a map (`kept`). A row-local value of
//! level 0 (X·W of the first layer) read at one later level is not kept but *floats*: it
//! is computed again from the features where that level reads it, since the features are
//! narrower than what would be kept and already on disk; one read at several later levels
//! (GCNII's h_0, APPNP's H) is kept, so that its product runs once. Level L is then
//! computed for rows r0..r1 at a time:
//!
//! * a neighbour op gets, through [`NeighbourOp::forward_block`](crate::op::NeighbourOp::forward_block),
//!   the block's rows of its sparse operand with the full graph's node ids as columns —
//!   an adjacency flavour built here, values normalised by full-graph degrees (as the
//!   in-memory pass does: `A_saint` is D⁻¹A), or a sparse neighbour op's output of this
//!   level — and the whole of X read in place by global id (the store's mapped features,
//!   or a kept matrix), so nothing is gathered here; the op computes the block's rows;
//! * row-local ops get their per-node inputs at the block's rows (a floating one computed
//!   there from the features);
//! * values of the level that are kept are written at rows r0..r1; the wanted output goes
//!   to the caller's sink, block by block, in order.
//!
//! An op with node statistics ([`NodeStats`](crate::op::NodeStats): PairNorm, GraphNorm)
//! sits one level above its x, like a neighbour op: x is kept (never floating), its
//! statistics are folded over x's rows block by block before the level's blocks, and the
//! op then computes its rows block by block.
//!
//! Values whose shape does not involve n (parameters and what is computed from them alone)
//! are computed once. A plan with an op that is none of these (a custom op that is not
//! row-local, a transposed sparse product, a whole-graph reduction) cannot be blocked:
//! [`BlockedPlan::new`] says why, and the caller evaluates it in memory instead.

use std::collections::{HashMap, HashSet};

use crate::exec::interp::step_order;
use crate::ir::{Fact, Graph, NodeId};
use crate::op::{AdjKind, Neighbour, SourceKind};

/// An adjacency built per block: a flavour, of the whole graph or of one relation of a
/// typed store (issue 57: `A_mean[r]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct AdjKey {
    /// The flavour.
    pub(super) kind: AdjKind,
    /// The relation, or `None`: the whole graph.
    pub(super) relation: Option<u32>,
}

/// What a node of the forward graph is to blocked evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// Shape without n: computed once.
    Static,
    /// The `sample` node (the whole graph).
    Subgraph,
    /// An adjacency flavour, built per block.
    Adj(AdjKey),
    /// A neighbour op's sparse output (attention coefficients): the block's rows.
    BlockSparse,
    /// The store's feature rows.
    Features,
    /// A row-local dense op.
    RowLocal,
    /// A neighbour op's dense per-node output.
    Neighbour,
    /// A parameter-free value computed by an earlier pass of the same
    /// [`FullGraph`](super::FullGraph) (see [`BlockedPlan::constants`]): read whole, like
    /// the features.
    Cached,
}

impl Class {
    /// A dense value with one row per node.
    pub(super) fn per_node(self) -> bool {
        matches!(
            self,
            Class::Features | Class::RowLocal | Class::Neighbour | Class::Cached
        )
    }
}

/// The analysis of a forward graph for blocked evaluation of one output.
#[derive(Clone, Debug)]
pub struct BlockedPlan {
    pub(super) order: Vec<NodeId>,
    pub(super) class: HashMap<NodeId, Class>,
    pub(super) level: HashMap<NodeId, usize>,
    /// The neighbour ops' operands.
    pub(super) neighbour: HashMap<NodeId, Neighbour>,
    /// The ops with node statistics ([`NodeStats`](crate::op::NodeStats)): row-local
    /// one level above their x, whose statistics are folded first.
    pub(super) stats: HashSet<NodeId>,
    /// Per-node values (not features) read at a higher level than their own.
    pub(super) kept: Vec<NodeId>,
    /// The kept values that float (see [`BlockedPlan::floating`]).
    floats: HashSet<NodeId>,
    /// The parameter-free per-node values a later pass may read from a cache (see
    /// [`BlockedPlan::constants`]).
    constants: Vec<NodeId>,
    pub(super) output: NodeId,
    pub(super) levels: usize,
    /// Lower-level values the output's level computes again at its own rows instead of
    /// reading them kept (see [`BlockedPlan::at_chosen_rows`]), in order: empty unless
    /// made by it.
    pub(super) deferred: Vec<NodeId>,
}

impl BlockedPlan {
    /// The adjacency flavours (and relations) the pass builds on each block.
    pub(super) fn adjacency_keys(&self) -> usize {
        let keys: std::collections::HashSet<AdjKey> = self
            .class
            .values()
            .filter_map(|c| match c {
                Class::Adj(k) => Some(*k),
                _ => None,
            })
            .collect();
        keys.len()
    }

    /// Classifies the ancestors of `output`; `Err` says why the graph cannot be blocked.
    pub fn new(graph: &Graph, output: NodeId) -> std::result::Result<BlockedPlan, String> {
        BlockedPlan::analyse(graph, output, &HashSet::new())
    }

    /// The analysis of a pass that reads the values `cached` (parameter-free values of
    /// this graph, see [`BlockedPlan::constants`]) whole from a cache, as it reads the
    /// features: they are of level 0, and what only they read is not computed.
    pub(super) fn with_cached(
        graph: &Graph,
        output: NodeId,
        cached: &HashSet<NodeId>,
    ) -> std::result::Result<BlockedPlan, String> {
        BlockedPlan::analyse(graph, output, cached)
    }

    fn analyse(
        graph: &Graph,
        output: NodeId,
        cached: &HashSet<NodeId>,
    ) -> std::result::Result<BlockedPlan, String> {
        let order = needed_order(graph, output, cached)?;
        let mut c = Classes::default();
        for &id in &order {
            // Read whole from the cache: what it was computed from is not in `order`.
            if cached.contains(&id) {
                c.constant.insert(id);
                c.class.insert(id, Class::Cached);
                c.level.insert(id, 0);
                continue;
            }
            if c.is_constant(graph, id) {
                c.constant.insert(id);
            }
            let (class, level) = c.classify(graph, id)?;
            c.class.insert(id, class);
            c.level.insert(id, level);
        }
        if !c.class[&output].per_node() {
            return Err("the output is not a per-node matrix".into());
        }
        let kept = c.kept_values(graph, &order);
        let floats = c.floating_values(graph, &order, &kept);
        let constants = c.constant_values(graph, &order, output);
        let levels = order.iter().map(|id| c.level[id]).max().unwrap_or(0) + 1;
        Ok(BlockedPlan {
            order,
            class: c.class,
            level: c.level,
            neighbour: c.neighbour,
            stats: c.stats,
            kept,
            floats,
            constants,
            output,
            levels,
            deferred: Vec::new(),
        })
    }

    /// This plan for a pass whose output level runs at chosen rows only (an evaluation's
    /// scored nodes): a kept value that only the output's level reads, and only row-locally
    /// (GraphSAGE's self term of the last layer, h·W_self, N × 256), is not kept but
    /// computed again at the chosen rows together with what of its own level it needs (h,
    /// and the aggregation under it at those rows) — its product then runs at the scored
    /// rows instead of every row, and its N rows are neither written nor paged in. `None`
    /// when nothing qualifies: what it needs of its level must take any rows (neighbour
    /// ops over an adjacency whose X is the features or kept — a floating X is then kept
    /// whole, as it is narrower than the value deferred —, no node statistics, no sparse
    /// outputs), and it must not fill a cache (`fill`).
    pub(super) fn at_chosen_rows(&self, graph: &Graph, fill: &[NodeId]) -> Option<BlockedPlan> {
        let top = self.level[&self.output];
        let readers = |id: NodeId| {
            self.order
                .iter()
                .copied()
                .filter(move |&c| graph.node(c).inputs.contains(&id))
        };
        // The nodes of `id`'s level that `id` needs, `id` included, in order.
        let own_level = |id: NodeId| -> HashSet<NodeId> {
            let l = self.level[&id];
            let mut need = HashSet::from([id]);
            for &c in self.order.iter().rev() {
                if need.contains(&c) {
                    for &src in &graph.node(c).inputs {
                        if self.level.get(&src) == Some(&l)
                            && matches!(self.class[&src], Class::RowLocal | Class::Neighbour)
                        {
                            need.insert(src);
                        }
                    }
                }
            }
            need
        };
        let computable = |c: NodeId| match self.class[&c] {
            Class::RowLocal => !self.stats.contains(&c),
            Class::Neighbour => {
                let nb = self.neighbour[&c];
                let node = graph.node(c);
                let x = node.inputs[nb.x];
                node.op.as_neighbour().is_some_and(|op| op.any_rows())
                    && matches!(self.class[&node.inputs[nb.adjacency]], Class::Adj(_))
                    && (self.class[&x] == Class::Features || self.kept.contains(&x))
            }
            _ => false,
        };
        let mut deferred: HashSet<NodeId> = HashSet::new();
        for &id in &self.kept {
            let l = self.level[&id];
            let ok = self.class[&id] == Class::RowLocal
                && l >= 1
                && l < top
                && !self.floating(id)
                && !fill.contains(&id)
                && readers(id).all(|c| {
                    self.level[&c] == l
                        || (self.level[&c] == top
                            && self.class[&c] == Class::RowLocal
                            && !self.stats.contains(&c))
                });
            if !ok {
                continue;
            }
            let need = own_level(id);
            if need.iter().all(|&c| computable(c)) {
                deferred.extend(need);
            }
        }
        if deferred.is_empty() {
            return None;
        }
        let mut plan = self.clone();
        // A floating X of a deferred neighbour op (the first layer's dropout(X), the
        // features' width) is kept whole instead: the output's level reads it at the
        // neighbours of its rows.
        for &c in &deferred {
            if self.class[&c] == Class::Neighbour {
                let node = graph.node(c);
                plan.floats.remove(&node.inputs[self.neighbour[&c].x]);
            }
        }
        // A deferred value stays kept when a higher level reads it otherwise than as a
        // row-local input of the output's level (a neighbour op's X, a level between).
        plan.kept.retain(|&id| {
            !deferred.contains(&id)
                || readers(id).any(|c| {
                    self.level[&c] > self.level[&id]
                        && !(self.level[&c] == top && self.class[&c] == Class::RowLocal)
                })
        });
        plan.deferred = self
            .order
            .iter()
            .copied()
            .filter(|c| deferred.contains(c))
            .collect();
        Some(plan)
    }

    /// The per-node values of this pass that depend on the store alone — no parameter and
    /// no op with randomness of its own between them and the store's sources (SGC's
    /// Â^K·X) — and that a value with a parameter reads (or that are the output): the
    /// same at every pass over this graph, so a [`FullGraph`](super::FullGraph) that keeps
    /// them computes them once and reads them whole afterwards (`BlockedPlan::with_cached`).
    pub fn constants(&self) -> &[NodeId] {
        &self.constants
    }

    /// A row-local value of level 0 (computed from the features and parameters alone)
    /// that one higher level reads: never written to scratch, but computed again at the
    /// rows where that level reads it — the store's features are read instead of a wider
    /// kept matrix (GraphSAGE's X·W_self is 256 columns wide, X 64), and a part of a
    /// streamed X is computed from the same part of the features. Only kept when an op
    /// reads it whole, in place. One read at several levels is kept: computing it again
    /// at each would repeat its product per level.
    pub(super) fn floating(&self, id: NodeId) -> bool {
        self.floats.contains(&id)
    }
}

/// The ancestors of `output` in step order, without those reached only through a cached
/// value.
fn needed_order(
    graph: &Graph,
    output: NodeId,
    cached: &HashSet<NodeId>,
) -> std::result::Result<Vec<NodeId>, String> {
    let mut order = step_order(graph, &[output]).map_err(|e| e.to_string())?;
    if !cached.is_empty() {
        let mut needed = HashSet::from([output]);
        for &id in order.iter().rev() {
            if needed.contains(&id) && !cached.contains(&id) {
                needed.extend(graph.node(id).inputs.iter().copied());
            }
        }
        order.retain(|id| needed.contains(id));
    }
    Ok(order)
}

/// What [`BlockedPlan::analyse`] finds of each value, node by node in step order.
#[derive(Default)]
struct Classes {
    /// Values that depend on the store alone: no parameter, no op with randomness of its
    /// own (`Op::pure`), only the store's sources (a source op of no known kind may be a
    /// parameter). Their values are the same at every pass.
    constant: HashSet<NodeId>,
    class: HashMap<NodeId, Class>,
    level: HashMap<NodeId, usize>,
    neighbour: HashMap<NodeId, Neighbour>,
    stats: HashSet<NodeId>,
}

impl Classes {
    /// Whether `id` depends on the store alone (see [`Classes::constant`]), its inputs
    /// classed.
    fn is_constant(&self, graph: &Graph, id: NodeId) -> bool {
        let node = graph.node(id);
        match node.op.source_kind() {
            Some(
                SourceKind::Subgraph
                | SourceKind::Features
                | SourceKind::Adjacency(_)
                | SourceKind::RelAdjacency { .. },
            ) => true,
            Some(_) => false,
            None => {
                !node.inputs.is_empty()
                    && node.op.pure()
                    && node.inputs.iter().all(|i| self.constant.contains(i))
            }
        }
    }

    /// The class and level of `id`, its inputs classed; a neighbour op's operands and a
    /// node-statistics op go to [`Classes::neighbour`] and [`Classes::stats`].
    fn classify(
        &mut self,
        graph: &Graph,
        id: NodeId,
    ) -> std::result::Result<(Class, usize), String> {
        let node = graph.node(id);
        let op = node.op.as_ref();
        let ins: Vec<Class> = node.inputs.iter().map(|i| self.class[i]).collect();
        let adj = |kind, relation| Class::Adj(AdjKey { kind, relation });
        Ok(match op.source_kind() {
            Some(SourceKind::Subgraph) => (Class::Subgraph, 0),
            Some(SourceKind::Adjacency(kind)) => (adj(kind, None), 0),
            Some(SourceKind::RelAdjacency { kind, relation }) => (adj(kind, Some(relation)), 0),
            Some(SourceKind::Features) => (Class::Features, 0),
            _ if ins.iter().all(|c| *c == Class::Static) && node.fact.is_static() => {
                (Class::Static, 0)
            }
            _ => {
                let facts: Vec<&Fact> = node.inputs.iter().map(|&i| graph.fact(i)).collect();
                match op.as_neighbour().map(|o| o.neighbour(&facts)) {
                    Some(nb) => self.neighbour_op(graph, id, &ins, nb)?,
                    None if op.as_node_stats().is_some() => self.stats_op(graph, id, &ins)?,
                    None => self.row_local_op(graph, id, &ins, &facts)?,
                }
            }
        })
    }

    /// The level of `id`'s input `i` (0 for an input not classed by level).
    fn input_level(&self, graph: &Graph, id: NodeId, i: usize) -> usize {
        self.level
            .get(&graph.node(id).inputs[i])
            .copied()
            .unwrap_or(0)
    }

    /// A neighbour op: one level above its X, at or above its adjacency's.
    fn neighbour_op(
        &mut self,
        graph: &Graph,
        id: NodeId,
        ins: &[Class],
        nb: Neighbour,
    ) -> std::result::Result<(Class, usize), String> {
        let node = graph.node(id);
        let what = || format!("`{}` ({})", node.op.name(), node.label);
        let (a, x) = (nb.adjacency, nb.x);
        let ok = a < ins.len()
            && x < ins.len()
            && a != x
            && matches!(ins[a], Class::Adj(_) | Class::BlockSparse)
            && ins[x].per_node()
            && (0..ins.len()).all(|i| i == a || i == x || ins[i] == Class::Static);
        if !ok {
            return Err(format!("{}: unexpected operands", what()));
        }
        let la = self.input_level(graph, id, a);
        let l = (self.input_level(graph, id, x) + 1).max(la);
        if ins[a] == Class::BlockSparse && la != l {
            return Err(format!(
                "{}: its sparse operand is computed at a lower level",
                what()
            ));
        }
        let c = match node.fact {
            Fact::Sparse { rows, .. } if rows == crate::ir::Dim::NODES => Class::BlockSparse,
            _ if per_node_rows(&node.fact) => Class::Neighbour,
            _ => return Err(format!("{} does not give one row per node", what())),
        };
        self.neighbour.insert(id, nb);
        Ok((c, l))
    }

    /// Statistics over every row of x first: x complete at a lower level (kept), the op
    /// one level above it, row by row.
    fn stats_op(
        &mut self,
        graph: &Graph,
        id: NodeId,
        ins: &[Class],
    ) -> std::result::Result<(Class, usize), String> {
        let node = graph.node(id);
        let ok = per_node_rows(&node.fact)
            && !ins.is_empty()
            && ins[0].per_node()
            && ins[1..]
                .iter()
                .all(|c| matches!(c, Class::Static | Class::Subgraph));
        if !ok {
            return Err(format!(
                "`{}` ({}): unexpected operands",
                node.op.name(),
                node.label
            ));
        }
        self.stats.insert(id);
        Ok((Class::RowLocal, self.input_level(graph, id, 0) + 1))
    }

    /// A row-local op of per-node values (the subgraph stands for the block's nodes, see
    /// `RowLocal`): at the highest level of its per-node inputs.
    fn row_local_op(
        &self,
        graph: &Graph,
        id: NodeId,
        ins: &[Class],
        facts: &[&Fact],
    ) -> std::result::Result<(Class, usize), String> {
        let node = graph.node(id);
        let inputs_ok = ins
            .iter()
            .all(|c| c.per_node() || matches!(c, Class::Static | Class::Subgraph));
        if !(per_node_rows(&node.fact)
            && inputs_ok
            && node.op.as_row_local().is_some_and(|r| r.row_local(facts)))
        {
            return Err(format!(
                "`{}` ({}) is not a row-local op of per-node values",
                node.op.name(),
                node.label
            ));
        }
        let l = (0..ins.len())
            .filter(|&i| ins[i].per_node())
            .map(|i| self.input_level(graph, id, i))
            .max()
            .unwrap_or(0);
        Ok((Class::RowLocal, l))
    }

    /// Values read at a higher level than their own (neighbour ops' X always are): kept,
    /// or computed again from the features where they are read (see `floating`).
    fn kept_values(&self, graph: &Graph, order: &[NodeId]) -> Vec<NodeId> {
        order
            .iter()
            .copied()
            .filter(|id| matches!(self.class[id], Class::RowLocal | Class::Neighbour))
            .filter(|id| {
                order
                    .iter()
                    .any(|&c| graph.node(c).inputs.contains(id) && self.level[&c] > self.level[id])
            })
            .collect()
    }

    /// A level-0 row-local value read at one higher level floats; read at several, it is
    /// kept: computed again at each it would cost its product (X·W_in, 1433 × 64 on Cora)
    /// once per reader's level — GCNII's h_0, read by all 64 layers, was 64 products of
    /// the features per evaluation (issue 53 item 7). An op's statistics read x whole,
    /// from where it is kept.
    fn floating_values(&self, graph: &Graph, order: &[NodeId], kept: &[NodeId]) -> HashSet<NodeId> {
        kept.iter()
            .copied()
            .filter(|id| self.class[id] == Class::RowLocal && self.level[id] == 0)
            .filter(|&id| {
                !self
                    .stats
                    .iter()
                    .any(|&s| graph.node(s).inputs.first() == Some(&id))
            })
            .filter(|&id| {
                let mut at: Vec<usize> = order
                    .iter()
                    .filter(|&&c| graph.node(c).inputs.contains(&id) && self.level[&c] > 0)
                    .map(|c| self.level[c])
                    .collect();
                at.sort_unstable();
                at.dedup();
                at.len() <= 1
            })
            .collect()
    }

    /// The parameter-free values that a value with a parameter reads (or the output):
    /// computed once per run where a cache keeps them (issue 53 item 7: SGC's Â²X).
    fn constant_values(&self, graph: &Graph, order: &[NodeId], output: NodeId) -> Vec<NodeId> {
        order
            .iter()
            .copied()
            .filter(|id| {
                self.constant.contains(id)
                    && matches!(self.class[id], Class::RowLocal | Class::Neighbour)
            })
            .filter(|&id| {
                id == output
                    || order
                        .iter()
                        .any(|c| graph.node(*c).inputs.contains(&id) && !self.constant.contains(c))
            })
            .collect()
    }
}

/// A dense fact of one row per node (not a sparse one).
fn per_node_rows(fact: &Fact) -> bool {
    !matches!(fact, Fact::Sparse { .. })
        && matches!(fact.matrix(), Some((r, _)) if r == crate::ir::Dim::NODES)
}

/// Columns of a per-node value (known at load time for every per-node value of a plan).
pub(super) fn width(graph: &Graph, id: NodeId) -> usize {
    graph
        .fact(id)
        .matrix()
        .and_then(|(_, c)| c.as_known())
        .unwrap_or(0)
}
