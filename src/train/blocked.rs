//! Out-of-core full-graph inference: the plan's forward pass over the whole stored graph,
//! layer by layer, in blocks of rows, so that memory is bounded by a block and the model,
//! not by the graph.
//!
//! The planned forward graph is cut into *levels* at its neighbour operations. A value's
//! level is the number of neighbour hops between it and the features: the features are
//! level 0 (they are the store's mapped file); a row-local op ([`Op::row_local`]: row i of
//! its output needs row i of its inputs) has its inputs' level; `spmm(S, X)` and
//! `gat(A, z, …)` need X (or z) at every neighbour of a row, so they sit one level above
//! it. A value read at a higher level than its own is *kept*: written, row block by row
//! block, into an N-row matrix — in memory when all kept values fit
//! [`InferOptions::memory_bytes`], otherwise in an unlinked temporary file (its blocks
//! reserved with `fallocate`, so a full disk is an error before anything runs) written
//! with positioned writes and read through a map. Level L is then computed for rows
//! r0..r1 at a time:
//!
//! * `spmm(A, X)`: the block's rows of A, with the full graph's node ids as columns and
//!   values normalised by full-graph degrees (as the in-memory pass does: `A_saint` is
//!   D⁻¹A), times the whole of X read in place — the store's mapped features, or a kept
//!   matrix — so nothing is gathered;
//! * `gat` (attention, and the product by its coefficients): U = the block's rows followed
//!   by their other neighbours (sorted); the adjacency is a square |U| × |U| pattern whose
//!   first r1 − r0 rows are the block's rows (local ids into U) and whose other rows are
//!   empty; z is gathered at U's rows, and the product keeps its first r1 − r0 rows;
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

use crate::error::Result;
use crate::exec::interp::{op_error, step_order};
use saintflow_ops::spmm::{block_width, spmm_blocked, CsrRef};

use crate::ir::recycle::recycle_value;
use crate::ir::{Bindings, Fact, Graph, NodeId, Params, SparseMat, Structure, Tensor, Value};
use crate::op::builtin::{AdjKind, Adjacency, Features, Gat, Sample, Spmm};
use crate::op::{Ctx, GraphSource};
use crate::store::GraphStore;

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
}

impl Default for InferOptions {
    fn default() -> InferOptions {
        InferOptions {
            block_bytes: 64 << 20,
            memory_bytes: 512 << 20,
            scratch_dir: std::env::temp_dir(),
            block_rows: None,
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
    /// Attention coefficients (sparse), per block from gathered z.
    Attention,
    /// The store's feature rows.
    Features,
    /// A row-local dense op.
    RowLocal,
    /// A sparse × dense product.
    Spmm,
}

impl Class {
    /// A dense value with one row per node.
    fn per_node(self) -> bool {
        matches!(self, Class::Features | Class::RowLocal | Class::Spmm)
    }
}

/// The analysis of a forward graph for blocked evaluation of one output.
#[derive(Debug)]
pub struct BlockedPlan {
    order: Vec<NodeId>,
    class: HashMap<NodeId, Class>,
    level: HashMap<NodeId, usize>,
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
        for &id in &order {
            let node = graph.node(id);
            let op = node.op.as_ref();
            let ins: Vec<Class> = node.inputs.iter().map(|i| class[i]).collect();
            let lvl = |i: usize| level.get(&node.inputs[i]).copied().unwrap_or(0);
            let what = || format!("`{}` ({})", op.name(), node.label);
            let (c, l) = if op.downcast_ref::<Sample>().is_some() {
                (Class::Subgraph, 0)
            } else if let Some(a) = op.downcast_ref::<Adjacency>() {
                (Class::Adj(a.kind), 0)
            } else if op.downcast_ref::<Features>().is_some() {
                (Class::Features, 0)
            } else if ins.iter().all(|c| *c == Class::Static) && node.fact.is_static() {
                (Class::Static, 0)
            } else if let Some(s) = op.downcast_ref::<Spmm>() {
                if s.transpose {
                    return Err(format!("{} multiplies by a transposed matrix", what()));
                }
                if !matches!(ins[0], Class::Adj(_) | Class::Attention) || !ins[1].per_node() {
                    return Err(format!("{}: unexpected operands", what()));
                }
                (Class::Spmm, (lvl(1) + 1).max(lvl(0)))
            } else if op.downcast_ref::<Gat>().is_some() {
                if !matches!(ins[0], Class::Adj(_))
                    || !ins[1].per_node()
                    || ins[2..].iter().any(|c| *c != Class::Static)
                {
                    return Err(format!("{}: unexpected operands", what()));
                }
                (Class::Attention, lvl(1) + 1)
            } else {
                let facts: Vec<&Fact> = node.inputs.iter().map(|&i| graph.fact(i)).collect();
                let per_node_rows =
                    matches!(node.fact.matrix(), Some((r, _)) if r == crate::ir::Dim::NODES);
                let inputs_ok = ins.iter().all(|c| c.per_node() || *c == Class::Static);
                if !(per_node_rows && inputs_ok && op.row_local(&facts)) {
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
            };
            class.insert(id, c);
            level.insert(id, l);
        }
        if !class[&output].per_node() {
            return Err("the output is not a per-node matrix".into());
        }
        // Kept: read at a higher level than their own (neighbour ops always are).
        let mut kept = Vec::new();
        for &id in &order {
            if !matches!(class[&id], Class::RowLocal | Class::Spmm) {
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
        fs4::fs_std::FileExt::allocate(&f, (len * 4) as u64).map_err(|source| {
            TrainError::Space {
                path: path.to_path_buf(),
                bytes: (len * 4) as u64,
                what:
                    "a value kept between layers (choose the scratch directory with --scratch-dir)",
                source,
            }
        })?;
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

/// One block of rows r0..r1: their adjacency rows with the full graph's node ids, and,
/// when attention needs it, U (the rows, then their other neighbours, ascending) with the
/// rows' neighbours as local ids into U, sorted per row.
struct Block {
    r0: usize,
    rows: usize,
    offsets: Vec<u32>,
    indices: Vec<u32>,
    local: Option<(Vec<u32>, Vec<u32>)>,
}

impl Block {
    fn new(store: &GraphStore, r0: usize, r1: usize, local: bool) -> Block {
        let full = store.full();
        let rows = r1 - r0;
        let base = full.offsets()[r0];
        let offsets: Vec<u32> = full.offsets()[r0..=r1]
            .iter()
            .map(|&o| (o - base) as u32)
            .collect();
        let indices = full.indices()[base as usize..full.offsets()[r1] as usize].to_vec();
        let local = local.then(|| {
            let outside = |v: u32| (v as usize) < r0 || (v as usize) >= r1;
            let mut extra: Vec<u32> = indices.iter().copied().filter(|&v| outside(v)).collect();
            extra.sort_unstable();
            extra.dedup();
            let mut li: Vec<u32> = indices
                .iter()
                .map(|&w| {
                    if outside(w) {
                        (rows + extra.binary_search(&w).expect("collected above")) as u32
                    } else {
                        w - r0 as u32
                    }
                })
                .collect();
            for i in 0..rows {
                li[offsets[i] as usize..offsets[i + 1] as usize].sort_unstable();
            }
            let mut u: Vec<u32> = (r0 as u32..r1 as u32).collect();
            u.extend_from_slice(&extra);
            (u, li)
        });
        Block {
            r0,
            rows,
            offsets,
            indices,
            local,
        }
    }

    /// U: the rows and their neighbours (only for a level with attention).
    fn u(&self) -> &[u32] {
        &self.local.as_ref().expect("built with neighbours").0
    }

    /// The block's adjacency in flavour `kind`, normalised by full-graph degrees: its rows
    /// with the full graph's ids as columns (`local` false: rows × N), or square on U with
    /// the rows past the block's empty (`local` true, for attention).
    fn adjacency(&self, store: &GraphStore, kind: AdjKind, local: bool) -> SparseMat {
        let full = store.full();
        let (indices_in, n): (&[u32], usize) = match (&self.local, local) {
            (Some((u, li)), true) => (li, u.len()),
            _ => (&self.indices, self.rows),
        };
        let global = |k: usize| -> u32 {
            match (&self.local, local) {
                (Some((u, li)), true) => u[li[k] as usize],
                _ => self.indices[k],
            }
        };
        let deg = |v: u32| full.degree(v) as f32;
        let (mut offsets, mut indices, mut values) = (vec![0u32], Vec::new(), Vec::new());
        for i in 0..self.rows {
            let range = self.offsets[i] as usize..self.offsets[i + 1] as usize;
            let row = &indices_in[range.clone()];
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
                    // The self loop goes where v sorts: local id i, or global id v.
                    let me = if local { i as u32 } else { v };
                    let at = row.partition_point(|&w| w < me);
                    let inv_v = 1.0 / (1.0 + d).sqrt();
                    let g = |k: usize| 1.0 / (1.0 + deg(global(range.start + k))).sqrt();
                    indices.extend_from_slice(&row[..at]);
                    values.extend((0..at).map(|k| inv_v * g(k)));
                    indices.push(me);
                    values.push(inv_v * inv_v);
                    indices.extend_from_slice(&row[at..]);
                    values.extend((at..row.len()).map(|k| inv_v * g(k)));
                }
            }
            offsets.push(indices.len() as u32);
        }
        if local {
            offsets.resize(n + 1, indices.len() as u32);
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
    let fail = |id: NodeId, e| -> crate::error::Error { op_error(graph.node(id), e).into() };

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

    let threads = rayon::current_num_threads();
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
    for level in 0..plan.levels {
        let work: Vec<NodeId> = plan
            .order
            .iter()
            .copied()
            .filter(|id| {
                plan.level[id] == level
                    && (matches!(
                        plan.class[id],
                        Class::RowLocal | Class::Spmm | Class::Attention
                    ) || *id == plan.output)
            })
            .collect();
        if work.is_empty() {
            continue;
        }
        let attention = work.iter().any(|id| plan.class[id] == Class::Attention);
        let mut r0 = 0;
        while r0 < n {
            let r1 = (r0 + block_rows).min(n);
            let block = Block::new(store, r0, r1, attention);
            let mut vals: HashMap<NodeId, Value> = HashMap::new();
            // Per-node input `src` at rows `ids` (the block's, or U).
            let kept_now = &kept;
            let rows_of = |vals: &HashMap<NodeId, Value>, src: NodeId, ids: &[u32]| -> Value {
                match plan.class[&src] {
                    Class::Static => statics[&src].clone(),
                    Class::RowLocal | Class::Spmm if plan.level[&src] == level => {
                        vals[&src].clone()
                    }
                    _ => {
                        let (data, cols) = whole(plan, graph, kept_now, features, src);
                        Value::dense(gather_rows(data, cols, ids))
                    }
                }
            };
            let own: Vec<u32> = (r0 as u32..r1 as u32).collect();
            for &id in &work {
                let node = graph.node(id);
                let forward = |ins: &[Value]| -> Result<Value> {
                    let refs: Vec<&Value> = ins.iter().collect();
                    let b = Bindings {
                        nodes: block.rows,
                        entries: block.indices.len(),
                    };
                    node.op.forward(&refs, &ctx(id, b)).map_err(|e| fail(id, e))
                };
                let out = match plan.class[&id] {
                    // Only as the output itself: a plan whose embedding is the features.
                    Class::Features => Value::dense(gather_rows(features, n_features, &own)),
                    Class::RowLocal => {
                        let ins: Vec<Value> = node
                            .inputs
                            .iter()
                            .map(|&i| rows_of(&vals, i, &own))
                            .collect();
                        forward(&ins)?
                    }
                    Class::Attention => {
                        let (adj, z) = (node.inputs[0], node.inputs[1]);
                        let Class::Adj(kind) = plan.class[&adj] else {
                            unreachable!("the analysis admits adjacency operands only")
                        };
                        let mut ins = vec![
                            Value::Sparse(block.adjacency(store, kind, true)),
                            rows_of(&vals, z, block.u()),
                        ];
                        ins.extend(node.inputs[2..].iter().map(|i| statics[i].clone()));
                        forward(&ins)?
                    }
                    Class::Spmm => {
                        let (s, x) = (node.inputs[0], node.inputs[1]);
                        match plan.class[&s] {
                            Class::Adj(kind) => {
                                // The block's rows of A times the whole of X, read in place.
                                let a = block.adjacency(store, kind, false);
                                let (data, f) = whole(plan, graph, kept_now, features, x);
                                let csr = CsrRef {
                                    offsets: &a.structure.offsets,
                                    indices: &a.structure.indices,
                                    values: Some(&a.values.data),
                                    n_cols: n,
                                };
                                let mut out = Tensor::zeros(block.rows, f);
                                spmm_blocked(
                                    csr,
                                    data,
                                    f,
                                    &mut out.data,
                                    block_width(0, f, threads),
                                )
                                .map_err(|e| fail(id, e.into()))?;
                                Value::dense(out)
                            }
                            _ => {
                                // Attention on U: the product has |U| rows, the block's first.
                                let ins = vec![vals[&s].clone(), rows_of(&vals, x, block.u())];
                                let mut out = forward(&ins)?;
                                if let Value::Dense(t) = &mut out {
                                    let t = Arc::make_mut(t);
                                    t.data.truncate(block.rows * t.cols);
                                    t.rows = block.rows;
                                }
                                out
                            }
                        }
                    }
                    Class::Static | Class::Subgraph | Class::Adj(_) => {
                        unreachable!("not in a level's work")
                    }
                };
                if plan.class[&id] != Class::Attention {
                    let ok = matches!(out.as_dense(), Some(t) if t.rows == block.rows && t.cols == width(graph, id));
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
            r0 = r1;
        }
    }
    Ok(())
}
