//! Out-of-core full-graph inference: the plan's forward pass over the whole stored graph,
//! layer by layer, in blocks of rows, so that memory is bounded by a block and the model,
//! not by the graph.
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
//! kept values fit [`InferOptions::memory_bytes`], otherwise in an unlinked temporary
//! file (its blocks reserved with `fallocate`, so a full disk is an error before anything
//! runs) written with positioned writes and read through a map. Level L is then computed
//! for rows r0..r1 at a time:
//!
//! * a neighbour op gets, through [`NeighbourOp::forward_block`](crate::op::NeighbourOp::forward_block),
//!   the block's rows of its sparse operand with the full graph's node ids as columns —
//!   an adjacency flavour built here, values normalised by full-graph degrees (as the
//!   in-memory pass does: `A_saint` is D⁻¹A), or a sparse neighbour op's output of this
//!   level — and the whole of X read in place by global id (the store's mapped features,
//!   or a kept matrix), so nothing is gathered here; the op computes the block's rows;
//! * row-local ops get their per-node inputs at the block's rows;
//! * values of the level that are kept are written at rows r0..r1; the wanted output goes
//!   to the caller's sink, block by block, in order.
//!
//! Values whose shape does not involve n (parameters and what is computed from them alone)
//! are computed once. A plan with an op that is none of these (a custom op that is not
//! row-local, a transposed sparse product, a whole-graph reduction) cannot be blocked:
//! [`BlockedPlan::new`] says why, and the caller evaluates it in memory instead.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::Result;
use crate::exec::interp::{op_error, step_order};

use crate::ir::recycle::recycle_value;
use crate::ir::{Bindings, Fact, Graph, NodeId, Params, SparseMat, Structure, Tensor, Value};
use crate::op::{AdjKind, Ctx, GraphSource, Neighbour, NodeRows, RowBlock, SourceKind};
use crate::store::{GraphStore, StoreError};

use super::TrainError;

/// How blocked inference uses memory and disk.
#[derive(Clone, Debug)]
pub struct InferOptions {
    /// Bytes a block's widest gathered matrix may take (sets the rows per block).
    pub block_bytes: usize,
    /// Kept values live in memory when they take at most this many bytes together;
    /// otherwise in memory-mapped temporary files.
    pub memory_bytes: usize,
    /// Where those files go (they are unlinked as soon as they are created).
    pub scratch_dir: PathBuf,
    /// Rows per block, instead of the rule from `block_bytes` (tests use odd sizes).
    pub block_rows: Option<usize>,
    /// What [`embed`](super::embed) checks the parameters' bytes against (training checks
    /// with [`TrainOptions::memory_limit`](super::TrainOptions::memory_limit)).
    pub memory_limit: super::MemoryLimit,
    /// Progress of the pass, by layer and row block with the bytes read (issue 27):
    /// training passes its own; hidden by default.
    pub progress: crate::progress::Progress,
}

impl Default for InferOptions {
    fn default() -> InferOptions {
        InferOptions {
            block_bytes: 64 << 20,
            memory_bytes: 512 << 20,
            scratch_dir: std::env::temp_dir(),
            block_rows: None,
            memory_limit: super::MemoryLimit::Detect,
            progress: crate::progress::Progress::hidden(),
        }
    }
}

/// What a node of the forward graph is to blocked evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Shape without n: computed once.
    Static,
    /// The `sample` node (the whole graph).
    Subgraph,
    /// An adjacency flavour, built per block.
    Adj(AdjKind),
    /// A neighbour op's sparse output (attention coefficients): the block's rows.
    BlockSparse,
    /// The store's feature rows.
    Features,
    /// A row-local dense op.
    RowLocal,
    /// A neighbour op's dense per-node output.
    Neighbour,
}

impl Class {
    /// A dense value with one row per node.
    fn per_node(self) -> bool {
        matches!(self, Class::Features | Class::RowLocal | Class::Neighbour)
    }
}

/// The analysis of a forward graph for blocked evaluation of one output.
#[derive(Debug)]
pub struct BlockedPlan {
    order: Vec<NodeId>,
    class: HashMap<NodeId, Class>,
    level: HashMap<NodeId, usize>,
    /// The neighbour ops' operands.
    neighbour: HashMap<NodeId, Neighbour>,
    /// Per-node values (not features) read at a higher level than their own.
    kept: Vec<NodeId>,
    output: NodeId,
    levels: usize,
}

impl BlockedPlan {
    /// Classifies the ancestors of `output`; `Err` says why the graph cannot be blocked.
    pub fn new(graph: &Graph, output: NodeId) -> std::result::Result<BlockedPlan, String> {
        let order = step_order(graph, &[output]).map_err(|e| e.to_string())?;
        let mut class: HashMap<NodeId, Class> = HashMap::new();
        let mut level: HashMap<NodeId, usize> = HashMap::new();
        let mut neighbour: HashMap<NodeId, Neighbour> = HashMap::new();
        for &id in &order {
            let node = graph.node(id);
            let op = node.op.as_ref();
            let ins: Vec<Class> = node.inputs.iter().map(|i| class[i]).collect();
            let lvl = |i: usize| level.get(&node.inputs[i]).copied().unwrap_or(0);
            let what = || format!("`{}` ({})", op.name(), node.label);
            let facts: Vec<&Fact> = node.inputs.iter().map(|&i| graph.fact(i)).collect();
            let (c, l) = match op.source_kind() {
                Some(SourceKind::Subgraph) => (Class::Subgraph, 0),
                Some(SourceKind::Adjacency(kind)) => (Class::Adj(kind), 0),
                Some(SourceKind::Features) => (Class::Features, 0),
                _ if ins.iter().all(|c| *c == Class::Static) && node.fact.is_static() => {
                    (Class::Static, 0)
                }
                _ => match op.as_neighbour().map(|o| o.neighbour(&facts)) {
                    Some(nb) => {
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
                        let l = (lvl(x) + 1).max(lvl(a));
                        if ins[a] == Class::BlockSparse && lvl(a) != l {
                            return Err(format!(
                                "{}: its sparse operand is computed at a lower level",
                                what()
                            ));
                        }
                        let c = match node.fact {
                            Fact::Sparse { rows, .. } if rows == crate::ir::Dim::NODES => {
                                Class::BlockSparse
                            }
                            _ if matches!(node.fact.matrix(), Some((r, _)) if r == crate::ir::Dim::NODES) => {
                                Class::Neighbour
                            }
                            _ => return Err(format!("{} does not give one row per node", what())),
                        };
                        neighbour.insert(id, nb);
                        (c, l)
                    }
                    None => {
                        let per_node_rows = !matches!(node.fact, Fact::Sparse { .. })
                            && matches!(node.fact.matrix(), Some((r, _)) if r == crate::ir::Dim::NODES);
                        let inputs_ok = ins.iter().all(|c| c.per_node() || *c == Class::Static);
                        if !(per_node_rows
                            && inputs_ok
                            && op.as_row_local().is_some_and(|r| r.row_local(&facts)))
                        {
                            return Err(format!(
                                "{} is not a row-local op of per-node values",
                                what()
                            ));
                        }
                        let l = (0..ins.len())
                            .filter(|&i| ins[i].per_node())
                            .map(lvl)
                            .max()
                            .unwrap_or(0);
                        (Class::RowLocal, l)
                    }
                },
            };
            class.insert(id, c);
            level.insert(id, l);
        }
        if !class[&output].per_node() {
            return Err("the output is not a per-node matrix".into());
        }
        // Kept: read at a higher level than their own (neighbour ops' X always are).
        let mut kept = Vec::new();
        for &id in &order {
            if !matches!(class[&id], Class::RowLocal | Class::Neighbour) {
                continue;
            }
            let later = order
                .iter()
                .any(|&c| graph.node(c).inputs.contains(&id) && level[&c] > level[&id]);
            if later {
                kept.push(id);
            }
        }
        let levels = order.iter().map(|id| level[id]).max().unwrap_or(0) + 1;
        Ok(BlockedPlan {
            order,
            class,
            level,
            neighbour,
            kept,
            output,
            levels,
        })
    }

    /// Values kept between levels: `(node, columns)`.
    fn kept(&self, graph: &Graph) -> Vec<(NodeId, usize)> {
        self.kept.iter().map(|&id| (id, width(graph, id))).collect()
    }
}

/// Columns of a per-node value (known at load time for every per-node value of a plan).
fn width(graph: &Graph, id: NodeId) -> usize {
    graph
        .fact(id)
        .matrix()
        .and_then(|(_, c)| c.as_known())
        .unwrap_or(0)
}

/// An N-row matrix kept between levels: in memory, or in a temporary file written with
/// positioned writes (no page faults on fresh pages) and read through a map.
enum Kept {
    Mem(Vec<f32>),
    File {
        file: std::fs::File,
        map: memmap2::Mmap,
    },
}

impl Kept {
    fn new(rows: usize, cols: usize, file: Option<&Path>) -> std::result::Result<Kept, TrainError> {
        let len = rows * cols;
        let Some(path) = file else {
            return Ok(Kept::Mem(vec![0.0; len]));
        };
        if len == 0 {
            return Ok(Kept::Mem(Vec::new()));
        }
        let io = |e: std::io::Error| TrainError::io(path, "create scratch file", e);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        // Unlinked at once: the open file keeps it alive and a crash leaves nothing behind.
        let _ = std::fs::remove_file(path);
        crate::atomic::reserve(
            &f,
            path,
            (len * 4) as u64,
            "a value kept between layers (choose the scratch directory with --scratch-dir)",
        )?;
        // SAFETY: the file was created by this process under a fresh name and unlinked at
        // once; nothing else can open, write or resize it; its blocks are reserved, and
        // this process only writes it through `write_rows` between reads of other rows.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io)?;
        Ok(Kept::File { file: f, map })
    }

    fn data(&self) -> &[f32] {
        match self {
            Kept::Mem(v) => v,
            // A mapping starts on a page boundary and its length is a multiple of 4.
            Kept::File { map, .. } => bytemuck::cast_slice(&map[..]),
        }
    }

    /// Writes `data` (whole rows) at element offset `at`.
    fn write(&mut self, at: usize, data: &[f32]) -> std::result::Result<(), TrainError> {
        match self {
            Kept::Mem(v) => {
                v[at..at + data.len()].copy_from_slice(data);
                Ok(())
            }
            Kept::File { file, .. } => {
                use std::io::{Seek, SeekFrom, Write};
                file.seek(SeekFrom::Start((at * 4) as u64))
                    .and_then(|_| file.write_all(bytemuck::cast_slice(data)))
                    .map_err(|e| TrainError::Infer(format!("writing a scratch file: {e}")))
            }
        }
    }
}

/// Copies rows `ids` of a row-major matrix with `cols` columns into a tensor.
fn gather_rows(data: &[f32], cols: usize, ids: &[u32]) -> Tensor {
    let mut t = Tensor::scratch(ids.len(), cols);
    if cols > 0 {
        t.data
            .par_chunks_mut(cols)
            .zip(ids.par_iter())
            .for_each(|(dst, &v)| {
                let v = v as usize;
                dst.copy_from_slice(&data[v * cols..(v + 1) * cols]);
            });
    }
    t
}

/// One block of rows r0..r1: their adjacency rows with the full graph's node ids.
struct Block {
    r0: usize,
    rows: usize,
    offsets: Vec<u32>,
    indices: Vec<u32>,
}

impl Block {
    /// Rows r0..r1 of the full graph; a neighbour id ≥ N (a corrupt store read before
    /// `check`) is an error naming the entry (one comparison per copied id).
    fn new(store: &GraphStore, r0: usize, r1: usize) -> Result<Block> {
        let full = store.full();
        let base = full.offsets()[r0];
        let offsets: Vec<u32> = full.offsets()[r0..=r1]
            .iter()
            .map(|&o| (o - base) as u32)
            .collect();
        let indices = full.indices()[base as usize..full.offsets()[r1] as usize].to_vec();
        let n = full.n_nodes() as u64;
        if let Some(k) = indices.iter().position(|&v| u64::from(v) >= n) {
            let u = r0 + offsets.partition_point(|&o| o as usize <= k) - 1;
            return Err(StoreError::neighbor_out_of_range(u as u32, indices[k], n).into());
        }
        Ok(Block {
            r0,
            rows: r1 - r0,
            offsets,
            indices,
        })
    }

    /// The block's adjacency in flavour `kind`, normalised by full-graph degrees: its rows
    /// with the full graph's ids as columns (rows × N).
    fn adjacency(&self, store: &GraphStore, kind: AdjKind) -> SparseMat {
        let full = store.full();
        let deg = |v: u32| full.degree(v) as f32;
        let (mut offsets, mut indices, mut values) = (vec![0u32], Vec::new(), Vec::new());
        for i in 0..self.rows {
            let row = &self.indices[self.offsets[i] as usize..self.offsets[i + 1] as usize];
            let v = (self.r0 + i) as u32;
            let d = deg(v);
            match kind {
                AdjKind::Raw => {
                    indices.extend_from_slice(row);
                    values.extend(row.iter().map(|_| 1.0f32));
                }
                AdjKind::Mean | AdjKind::Saint => {
                    let inv = 1.0 / d.max(1.0);
                    indices.extend_from_slice(row);
                    values.extend(row.iter().map(|_| inv));
                }
                AdjKind::Sym => {
                    // The self loop goes where v sorts.
                    let at = row.partition_point(|&w| w < v);
                    let inv_v = 1.0 / (1.0 + d).sqrt();
                    let g = |w: u32| 1.0 / (1.0 + deg(w)).sqrt();
                    indices.extend_from_slice(&row[..at]);
                    values.extend(row[..at].iter().map(|&w| inv_v * g(w)));
                    indices.push(v);
                    values.push(inv_v * inv_v);
                    indices.extend_from_slice(&row[at..]);
                    values.extend(row[at..].iter().map(|&w| inv_v * g(w)));
                }
            }
            offsets.push(indices.len() as u32);
        }
        let nnz = values.len();
        SparseMat {
            // No transpose permutation: the analysis admits no transposed product.
            structure: Arc::new(Structure {
                offsets,
                indices,
                transpose: Vec::new(),
            }),
            values: Arc::new(Tensor::from_vec(nnz, 1, values).expect("one value per entry")),
        }
    }
}

/// Evaluates `plan`'s output over the whole store, block by block; `sink(r0, block)` gets
/// rows r0.. of the output in order.
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
    let n = store.n_nodes();
    let ctx = |id: NodeId, b: Bindings| Ctx {
        source: Some(source),
        params,
        step: 0,
        seed: 0,
        training: false,
        node: id,
        bindings: b,
    };
    let fail = |id: NodeId, e| -> TrainError { op_error(graph.node(id), e).into() };

    // Static values, once.
    let mut statics: HashMap<NodeId, Value> = HashMap::new();
    for &id in &plan.order {
        if plan.class[&id] != Class::Static {
            continue;
        }
        let node = graph.node(id);
        let ins: Vec<&Value> = node.inputs.iter().map(|i| &statics[i]).collect();
        let v = node
            .op
            .forward(
                &ins,
                &ctx(
                    id,
                    Bindings {
                        nodes: 0,
                        entries: 0,
                    },
                ),
            )
            .map_err(|e| fail(id, e))?;
        statics.insert(id, v);
    }

    // Kept matrices: in memory or in scratch files.
    let widths = plan.kept(graph);
    let kept_bytes: usize = widths.iter().map(|&(_, c)| 4 * n * c).sum();
    let on_disk = kept_bytes > opts.memory_bytes;
    let mut kept: HashMap<NodeId, Kept> = HashMap::new();
    for (k, (id, cols)) in widths.into_iter().enumerate() {
        let file = on_disk.then(|| {
            opts.scratch_dir
                .join(format!(".saintflow-infer-{}-{k}", std::process::id()))
        });
        kept.insert(id, Kept::new(n, cols, file.as_deref())?);
    }

    // Rows per block: the widest per-node value, gathered over a block and its neighbours.
    let widest = plan
        .order
        .iter()
        .filter(|id| plan.class[id].per_node())
        .map(|&id| width(graph, id))
        .max()
        .unwrap_or(1)
        .max(1);
    let fanout = 1 + store.full().n_entries() / n.max(1);
    let block_rows = opts
        .block_rows
        .unwrap_or(opts.block_bytes / (4 * widest * fanout))
        .clamp(1, n.max(1));

    let features = store.features();
    let n_features = store.n_features();
    // A lower level's per-node value, whole (N rows).
    fn whole<'a>(
        plan: &BlockedPlan,
        graph: &Graph,
        kept: &'a HashMap<NodeId, Kept>,
        features: &'a [f32],
        src: NodeId,
    ) -> (&'a [f32], usize) {
        match plan.class[&src] {
            Class::Features => (features, width(graph, src)),
            _ => (kept[&src].data(), width(graph, src)),
        }
    }
    let work_of = |level: usize| -> Vec<NodeId> {
        plan.order
            .iter()
            .copied()
            .filter(|id| {
                plan.level[id] == level
                    && (matches!(
                        plan.class[id],
                        Class::RowLocal | Class::Neighbour | Class::BlockSparse
                    ) || *id == plan.output)
            })
            .collect()
    };
    // The levels with work, each with its nodes.
    let levels: Vec<(usize, Vec<NodeId>)> = (0..plan.levels)
        .map(|l| (l, work_of(l)))
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let ticker = opts
        .progress
        .ticker((levels.len() * n) as u64, "full-graph pass", "rows");
    for (li, (level, work)) in levels.iter().enumerate() {
        let level = *level;
        ticker.set_message(format!("layer {}/{}", li + 1, levels.len()));
        let mut r0 = 0;
        while r0 < n {
            let r1 = (r0 + block_rows).min(n);
            let block = Block::new(store, r0, r1)?;
            let mut adjacency: HashMap<AdjKind, SparseMat> = HashMap::new();
            let mut vals: HashMap<NodeId, Value> = HashMap::new();
            let own: Vec<u32> = (r0 as u32..r1 as u32).collect();
            for &id in work {
                let node = graph.node(id);
                let out = match plan.class[&id] {
                    // Only as the output itself: a plan whose embedding is the features.
                    Class::Features => Value::dense(gather_rows(features, n_features, &own)),
                    Class::RowLocal => {
                        // Per-node inputs at the block's rows: this level's, or gathered.
                        let ins: Vec<Value> = node
                            .inputs
                            .iter()
                            .map(|&src| match plan.class[&src] {
                                Class::Static => statics[&src].clone(),
                                Class::RowLocal | Class::Neighbour if plan.level[&src] == level => {
                                    vals[&src].clone()
                                }
                                _ => {
                                    let (data, cols) = whole(plan, graph, &kept, features, src);
                                    Value::dense(gather_rows(data, cols, &own))
                                }
                            })
                            .collect();
                        let refs: Vec<&Value> = ins.iter().collect();
                        let b = Bindings {
                            nodes: block.rows,
                            entries: block.indices.len(),
                        };
                        node.op
                            .forward(&refs, &ctx(id, b))
                            .map_err(|e| fail(id, e))?
                    }
                    Class::Neighbour | Class::BlockSparse => {
                        let nb = plan.neighbour[&id];
                        let (s, x) = (node.inputs[nb.adjacency], node.inputs[nb.x]);
                        if let Class::Adj(kind) = plan.class[&s] {
                            adjacency
                                .entry(kind)
                                .or_insert_with(|| block.adjacency(store, kind));
                        }
                        let a = match plan.class[&s] {
                            Class::Adj(kind) => &adjacency[&kind],
                            _ => vals[&s].as_sparse().ok_or_else(|| {
                                fail(id, crate::op::OpError::args("sparse operand expected"))
                            })?,
                        };
                        let (data, cols) = whole(plan, graph, &kept, features, x);
                        let inputs: Vec<Option<&Value>> = node
                            .inputs
                            .iter()
                            .enumerate()
                            .map(|(i, src)| (i != nb.adjacency && i != nb.x).then(|| &statics[src]))
                            .collect();
                        let rb = RowBlock {
                            r0,
                            n_nodes: n,
                            adjacency: a,
                            x: NodeRows::new(data, cols),
                            inputs: &inputs,
                        };
                        let b = Bindings {
                            nodes: block.rows,
                            entries: a.structure.nnz(),
                        };
                        node.op
                            .as_neighbour()
                            .ok_or_else(|| {
                                fail(id, crate::op::OpError::args("not a neighbour op"))
                            })?
                            .forward_block(&rb, &ctx(id, b))
                            .map_err(|e| fail(id, e))?
                    }
                    Class::Static | Class::Subgraph | Class::Adj(_) => {
                        unreachable!("not in a level's work")
                    }
                };
                let ok = match plan.class[&id] {
                    Class::BlockSparse => {
                        matches!(out.as_sparse(), Some(s) if s.structure.n_rows() == block.rows)
                    }
                    _ => matches!(
                        out.as_dense(),
                        Some(t) if t.rows == block.rows && t.cols == width(graph, id)
                    ),
                };
                if !ok {
                    return Err(fail(
                        id,
                        crate::op::OpError::args(format!(
                            "row-blocked evaluation: expected {} × {} for rows {r0}..{r1}",
                            block.rows,
                            width(graph, id)
                        )),
                    ));
                }
                vals.insert(id, out);
            }
            for (&id, k) in kept.iter_mut() {
                if plan.level[&id] == level {
                    let t = vals[&id].as_dense().expect("checked dense");
                    k.write(r0 * t.cols, &t.data)?;
                }
            }
            if plan.level[&plan.output] == level {
                sink(r0, vals[&plan.output].as_dense().expect("checked dense"))?;
            }
            vals.into_values().for_each(recycle_value);
            ticker.inc((r1 - r0) as u64);
            r0 = r1;
        }
    }
    ticker.finish();
    Ok(())
}
