//! Out-of-core full-graph inference: the plan's forward pass over the whole stored graph,
//! layer by layer, in blocks of rows, so that memory is bounded by a block, a buffer and
//! the model, not by the graph.
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
//! runs) written with positioned writes and read through a map. A row-local value of
//! level 0 (X·W of the first layer) is not kept but *floats*: it is computed again from
//! the features wherever a later level reads it, since the features are narrower than
//! what would be kept and already on disk. Level L is then computed for rows r0..r1 at a
//! time:
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
//! **Streaming X** (issue 27). Read in place, X is read row by row at the neighbours' ids:
//! random reads, which for an X larger than memory (a kept matrix of millions of rows, a
//! store's features under a memory cap) thrash the page cache and read the disk over and
//! over. An op that folds ([`NeighbourFold`](crate::op::NeighbourFold): a weighted sum, a
//! maximum) over an adjacency flavour is instead computed a *chunk* of output rows at a
//! time, with the chunk's accumulators in memory, while X goes past in *parts* of
//! consecutive rows, in ascending order, each part read sequentially once per chunk (the
//! next part asked for while one is folded); the chunk's adjacency is cut by column
//! ([`SparseMat::column_part`]) so that each part folds the entries whose neighbours it
//! holds. The store's rows are sorted, so the parts' entries in turn are each row's
//! entries in CSR order: the result is the in-place pass's, bit for bit. A floating X's
//! part is computed from the same part of the features. This is MariusGNN's idea
//! (EuroSys'23: a buffer of node partitions, the edge buckets between them, sequential
//! reads) in its simplest order: with the outputs' accumulators resident there is no
//! second partition to swap, so X is read ⌈N / chunk rows⌉ times and written never.
//! The buffer ([`InferOptions::buffer_bytes`]) is half of what the memory limit leaves
//! beside the process: an X larger than half of it is streamed, a smaller one read in
//! place.
//!
//! Before the pass, [`PassPlan`] says what will happen — the bytes kept and where, the
//! scratch disk's free space, the buffer, the parts and chunks, the bytes to read and
//! write — and refuses a pass that cannot work (kept values beyond the scratch disk's
//! free space), naming what to change. An out-of-core pass prints it as one line, and a
//! line with the bytes it read when it ends.
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
use crate::ir::{Bindings, Fact, Graph, NodeId, Params, SparseMat, Tensor, Value};
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
    /// Memory for streaming a neighbour op's X in parts of rows: an eighth for a part
    /// (and as much for the next one, read ahead), three quarters for a chunk of output
    /// rows' accumulators and adjacency. None: half of
    /// [`memory_limit`](Self::memory_limit). An X larger than half of it is streamed; a
    /// smaller one is read in place.
    pub buffer_bytes: Option<usize>,
    /// Rows per part of X, instead of the rule from the buffer; streams every neighbour
    /// op that can fold (tests force many parts with a small number).
    pub part_rows: Option<usize>,
    /// Output rows per chunk when streaming, instead of the rule from the buffer.
    pub chunk_rows: Option<usize>,
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
            buffer_bytes: None,
            part_rows: None,
            chunk_rows: None,
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
        // Read at a higher level than their own (neighbour ops' X always are): kept, or
        // computed again from the features where they are read (see `floating`).
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

    /// A row-local value of level 0 (computed from the features and parameters alone):
    /// never written to scratch, but computed again at the rows where a later level reads
    /// it — the store's features are read instead of a wider kept matrix (GraphSAGE's
    /// X·W_self is 256 columns wide, X 64), and a part of a streamed X is computed from
    /// the same part of the features. Only kept when an op reads it whole, in place.
    fn floating(&self, id: NodeId) -> bool {
        self.class[&id] == Class::RowLocal && self.level[&id] == 0
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

    /// Asks the kernel to start reading elements `at..at + len` (a file's; MADV_WILLNEED),
    /// a part of X read next.
    fn will_need(&self, at: usize, len: usize) {
        if let Kept::File { map, .. } = self {
            let (at, end) = (at * 4, ((at + len) * 4).min(map.len()));
            if end > at {
                // A hint: refused, it changes speed only.
                let _ = map.advise_range(memmap2::Advice::WillNeed, at, end - at);
            }
        }
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
        let row_of = |k: usize| (r0 + offsets.partition_point(|&o| o as usize <= k) - 1) as u32;
        if let Some(k) = indices.iter().position(|&v| u64::from(v) >= n) {
            return Err(StoreError::neighbor_out_of_range(row_of(k), indices[k], n).into());
        }
        // Sorted rows: the order streaming X in parts relies on.
        for w in offsets.windows(2) {
            let row = &indices[w[0] as usize..w[1] as usize];
            if let Some(k) = row.windows(2).position(|p| p[1] <= p[0]) {
                let at = w[0] as usize + k + 1;
                return Err(StoreError::row_not_sorted(row_of(at), indices[at]).into());
            }
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
        // No transpose permutation: the analysis admits no transposed product.
        SparseMat::csr(offsets, indices, values, 1)
    }
}

/// What one level streams: the neighbour ops whose X is read in parts of rows.
#[derive(Clone, Debug)]
struct LevelStream {
    level: usize,
    /// Output rows per chunk: the accumulators of every streamed op of the level.
    chunk_rows: usize,
    sources: Vec<StreamSource>,
}

/// One X read in parts, and the ops that fold it.
#[derive(Clone, Debug)]
struct StreamSource {
    x: NodeId,
    cols: usize,
    part_rows: usize,
    ops: Vec<NodeId>,
    /// Larger than half the buffer (not only streamed because it floats).
    large: bool,
}

/// A full-graph pass, decided before it starts (issue 27): what is kept between layers
/// and where, the buffer that X is streamed through, and the reads and writes to expect.
/// [`PassPlan::new`] refuses a pass that cannot work, saying what to change; `Display`
/// is the one line printed before an out-of-core pass.
#[derive(Clone, Debug)]
pub struct PassPlan {
    nodes: usize,
    layers: usize,
    /// Values kept between levels: `(node, columns)`.
    kept: Vec<(NodeId, usize)>,
    kept_bytes: u64,
    /// The scratch directory and its free bytes, when kept values go to files.
    scratch: Option<(PathBuf, Option<u64>)>,
    buffer_bytes: u64,
    block_rows: usize,
    streams: Vec<LevelStream>,
    /// Neighbour ops that read a large X in place by the neighbours' ids: label, X's bytes.
    in_place: Vec<(String, u64)>,
    read_bytes: u64,
    write_bytes: u64,
}

/// The recycled buffers a pass keeps (its blocks' values, a few MiB each).
const PASS_POOL_BYTES: usize = 64 << 20;

/// Of the buffer, what a part of X may take (1/8: the next part is read ahead while one is
/// folded), and what a chunk's accumulators and adjacency may take (3/4).
const PART_SHARE: u64 = 8;
const ACC_SHARE: u64 = 3;
const ACC_OF: u64 = 4;

impl PassPlan {
    /// The plan of `plan`'s pass over `store` with `opts`; an error when it cannot work
    /// (the kept values do not fit the scratch directory's disk).
    pub fn new(
        store: &GraphStore,
        graph: &Graph,
        plan: &BlockedPlan,
        opts: &InferOptions,
    ) -> Result<PassPlan> {
        let n = store.n_nodes();
        let bytes = |cols: usize| 4 * n as u64 * cols as u64;
        let buffer = opts
            .buffer_bytes
            .map_or_else(|| default_buffer(opts), |b| b as u64);
        let fanout = 1 + store.full().n_entries() / n.max(1);
        let mut streams = Vec::new();
        let mut in_place = Vec::new();
        // Level-0 values that an op reads whole, in place: kept after all.
        let mut whole = Vec::new();
        for level in 0..plan.levels {
            let mut sources: Vec<StreamSource> = Vec::new();
            let mut flavours = Vec::new();
            for &id in plan.order.iter().filter(|id| plan.level[id] == level) {
                let Some(nb) = plan.neighbour.get(&id) else {
                    continue;
                };
                let node = graph.node(id);
                let (a, x) = (node.inputs[nb.adjacency], node.inputs[nb.x]);
                let cols = width(graph, x);
                let foldable = node.op.as_neighbour().and_then(|o| o.fold()).is_some()
                    && matches!(plan.class[&a], Class::Adj(_));
                let large = bytes(cols) > buffer / 2;
                // A floating X streams whatever its size: its parts are computed from the
                // features' parts, where reading it in place would need it whole, kept.
                if foldable && (large || plan.floating(x) || opts.part_rows.is_some()) {
                    flavours.push(plan.class[&a]);
                    match sources.iter_mut().find(|s| s.x == x) {
                        Some(s) => s.ops.push(id),
                        None => sources.push(StreamSource {
                            x,
                            cols,
                            part_rows: 0,
                            ops: vec![id],
                            large,
                        }),
                    }
                    continue;
                }
                if plan.floating(x) {
                    whole.push(x);
                }
                if large {
                    in_place.push((
                        format!("`{}` ({})", node.op.name(), node.label),
                        bytes(cols),
                    ));
                }
            }
            if sources.is_empty() {
                continue;
            }
            let share = buffer / PART_SHARE / sources.len() as u64;
            for s in &mut sources {
                let rows = (share / (4 * s.cols.max(1) as u64)) as usize;
                s.part_rows = opts.part_rows.unwrap_or(rows).clamp(1, n.max(1));
            }
            flavours.dedup();
            let acc_row: usize = sources
                .iter()
                .flat_map(|s| &s.ops)
                .map(|&id| 4 * width(graph, id))
                .sum::<usize>()
                + 12 * fanout * flavours.len();
            let rows = (buffer * ACC_SHARE / ACC_OF / acc_row.max(1) as u64) as usize;
            streams.push(LevelStream {
                level,
                chunk_rows: opts.chunk_rows.unwrap_or(rows).clamp(1, n.max(1)),
                sources,
            });
        }
        let kept: Vec<(NodeId, usize)> = plan
            .kept
            .iter()
            .filter(|&&id| !plan.floating(id) || whole.contains(&id))
            .map(|&id| (id, width(graph, id)))
            .collect();
        let kept_bytes: u64 = kept.iter().map(|&(_, c)| bytes(c)).sum();
        let on_disk = kept_bytes > opts.memory_bytes as u64;
        let scratch = on_disk.then(|| {
            let free = fs4::available_space(&opts.scratch_dir).ok();
            (opts.scratch_dir.clone(), free)
        });
        if let Some((dir, Some(free))) = &scratch {
            if *free < kept_bytes {
                return Err(TrainError::Infer(format!(
                    "the values kept between layers need {} of scratch space in {}, which has {} free: choose a directory on a larger disk with --scratch-dir, or give the pass enough memory to keep them there (--memory MIB, now {})",
                    crate::machine::human(kept_bytes.into()),
                    dir.display(),
                    crate::machine::human((*free).into()),
                    crate::machine::human(opts.memory_bytes as u128),
                )));
            }
        }
        // Reads: each streamed X once per chunk (the features' part for an X computed
        // from them), every large X read in place at least once, and a kept value read at
        // its own rows by a later level once.
        let features = bytes(store.n_features());
        let mut read_bytes: u64 = streams
            .iter()
            .flat_map(|l| {
                let chunks = n.div_ceil(l.chunk_rows) as u64;
                l.sources.iter().map(move |s| {
                    let x = if plan.floating(s.x) {
                        features
                    } else {
                        bytes(s.cols)
                    };
                    chunks * x
                })
            })
            .sum();
        read_bytes += in_place.iter().map(|(_, b)| b).sum::<u64>();
        for &(id, cols) in &kept {
            let own_rows = plan.order.iter().any(|&c| {
                let node = graph.node(c);
                plan.level[&c] > plan.level[&id]
                    && node.inputs.contains(&id)
                    && plan
                        .neighbour
                        .get(&c)
                        .is_none_or(|nb| node.inputs[nb.x] != id)
            });
            if own_rows {
                read_bytes += bytes(cols);
            }
        }
        let widest = plan
            .order
            .iter()
            .filter(|id| plan.class[id].per_node())
            .map(|&id| width(graph, id))
            .max()
            .unwrap_or(1)
            .max(1);
        let block_rows = opts
            .block_rows
            .unwrap_or(opts.block_bytes / (4 * widest * fanout))
            .clamp(1, n.max(1));
        Ok(PassPlan {
            nodes: n,
            layers: plan.levels.saturating_sub(1).max(1),
            kept,
            kept_bytes,
            write_bytes: if on_disk { kept_bytes } else { 0 },
            scratch,
            buffer_bytes: buffer,
            block_rows,
            streams,
            in_place,
            read_bytes,
        })
    }

    /// Whether the pass uses disk beyond the store (kept values in files) or an X larger
    /// than half the buffer: what is worth a line before it starts.
    pub fn out_of_core(&self) -> bool {
        self.scratch.is_some()
            || !self.in_place.is_empty()
            || self
                .streams
                .iter()
                .flat_map(|l| &l.sources)
                .any(|s| s.large)
    }

    /// The bytes of features and kept values the pass is expected to read.
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes
    }

    /// How many times each level's streamed X is read: output chunks per level.
    pub fn chunks(&self) -> Vec<(usize, usize)> {
        self.streams
            .iter()
            .map(|l| (l.level, self.nodes.div_ceil(l.chunk_rows)))
            .collect()
    }
}

impl std::fmt::Display for PassPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::machine::human;
        write!(
            f,
            "full-graph pass over {} nodes, {} layers: ",
            self.nodes, self.layers
        )?;
        match &self.scratch {
            None => write!(
                f,
                "{} kept between layers in memory",
                human(self.kept_bytes.into())
            )?,
            Some((dir, free)) => {
                write!(
                    f,
                    "{} kept between layers ({} values) in scratch files in {}",
                    human(self.kept_bytes.into()),
                    self.kept.len(),
                    dir.display()
                )?;
                if let Some(free) = free {
                    write!(f, " ({} free)", human((*free).into()))?;
                }
            }
        }
        write!(f, "; buffer {}", human(self.buffer_bytes.into()))?;
        for l in &self.streams {
            let parts: Vec<String> = l
                .sources
                .iter()
                .map(|s| format!("{} rows", s.part_rows))
                .collect();
            write!(
                f,
                "; level {} streams X in parts of {} into {} chunk(s) of {} rows",
                l.level,
                parts.join(" / "),
                self.nodes.div_ceil(l.chunk_rows),
                l.chunk_rows
            )?;
        }
        for (op, b) in &self.in_place {
            write!(f, "; {op} reads its X ({}) in place", human((*b).into()))?;
        }
        write!(
            f,
            "; blocks of {} rows; expected reads {}, scratch writes {}",
            self.block_rows,
            human(self.read_bytes.into()),
            human(self.write_bytes.into())
        )
    }
}

/// The streaming buffer when none is given: half of what the memory limit (a cgroup's,
/// when the process runs in one; 2 GiB when there is none to read) leaves beside the
/// process's anonymous memory now, and at least 64 MiB.
fn default_buffer(opts: &InferOptions) -> u64 {
    let limit = opts
        .memory_limit
        .resolve()
        .or_else(crate::machine::machine_memory)
        .map_or(2 << 30, |(b, _)| b);
    let used = crate::machine::anon_resident(std::process::id());
    (limit.saturating_sub(used) / 2).max(64 << 20)
}

/// The announced plans of this process: each different plan is printed once, not at
/// every evaluation of a run.
static ANNOUNCED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// What every block and chunk of a pass reads: the graph, the analysis, the static values.
struct Pass<'a> {
    store: &'a GraphStore,
    graph: &'a Graph,
    plan: &'a BlockedPlan,
    source: &'a dyn GraphSource,
    params: &'a Params,
    statics: HashMap<NodeId, Value>,
    features: &'a [f32],
}

impl<'a> Pass<'a> {
    fn ctx(&self, id: NodeId, b: Bindings) -> Ctx<'_> {
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

    fn fail(&self, id: NodeId, e: crate::op::OpError) -> TrainError {
        op_error(self.graph.node(id), e).into()
    }

    /// A lower level's per-node value, whole (N rows).
    fn whole<'k>(&'k self, kept: &'k HashMap<NodeId, Kept>, src: NodeId) -> (&'k [f32], usize) {
        match self.plan.class[&src] {
            Class::Features => (self.features, width(self.graph, src)),
            _ => (kept[&src].data(), width(self.graph, src)),
        }
    }

    /// A floating value (see `BlockedPlan::floating`) at rows `own`, computed from the
    /// features there; `memo` holds what is already computed for these rows.
    fn local(&self, id: NodeId, own: &[u32], memo: &mut HashMap<NodeId, Value>) -> Result<Value> {
        if let Some(v) = memo.get(&id) {
            return Ok(v.clone());
        }
        let v = match self.plan.class[&id] {
            Class::Static => return Ok(self.statics[&id].clone()),
            Class::Features => {
                Value::dense(gather_rows(self.features, self.store.n_features(), own))
            }
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
    fn other_inputs(&self, id: NodeId, nb: Neighbour) -> Vec<Option<&Value>> {
        let node = self.graph.node(id);
        node.inputs
            .iter()
            .enumerate()
            .map(|(i, src)| (i != nb.adjacency && i != nb.x).then(|| &self.statics[src]))
            .collect()
    }

    /// The streamed ops' outputs at rows c0..c1: each source's X read in parts of rows,
    /// in ascending order, every part folded into the ops' accumulators.
    fn fold_chunk(
        &self,
        kept: &HashMap<NodeId, Kept>,
        c0: usize,
        c1: usize,
        stream: &LevelStream,
        ticker: &crate::progress::Ticker,
    ) -> Result<HashMap<NodeId, Arc<Tensor>>> {
        let n = self.store.n_nodes();
        let block = Block::new(self.store, c0, c1)?;
        let mut adjacency: HashMap<AdjKind, SparseMat> = HashMap::new();
        let mut out = HashMap::new();
        // Progress: the chunk's rows once over all its parts.
        let (sources, mut ticked) = (stream.sources.len(), 0);
        for (si, src) in stream.sources.iter().enumerate() {
            let computed = !kept.contains_key(&src.x) && self.plan.class[&src.x] != Class::Features;
            let (data, cols) = if computed {
                (&[][..], src.cols)
            } else {
                self.whole(kept, src.x)
            };
            struct Fold<'f> {
                id: NodeId,
                op: &'f dyn crate::op::NeighbourFold,
                kind: AdjKind,
                cursor: Vec<u32>,
                acc: Tensor,
            }
            let mut folds = Vec::new();
            for &id in &src.ops {
                let node = self.graph.node(id);
                let nb = self.plan.neighbour[&id];
                let Class::Adj(kind) = self.plan.class[&node.inputs[nb.adjacency]] else {
                    unreachable!("only ops over an adjacency flavour stream")
                };
                let a = adjacency
                    .entry(kind)
                    .or_insert_with(|| block.adjacency(self.store, kind));
                let op = node
                    .op
                    .as_neighbour()
                    .and_then(|o| o.fold())
                    .expect("only folds stream");
                folds.push(Fold {
                    id,
                    op,
                    kind,
                    cursor: a.structure.offsets[..block.rows].to_vec(),
                    acc: op.start(block.rows, cols),
                });
            }
            let mut p0 = 0;
            while p0 < n {
                let p1 = (p0 + src.part_rows).min(n);
                let p2 = (p1 + src.part_rows).min(n);
                // A kept X or the features: read in place, the next part asked for now; a
                // floating X: computed from the features' part.
                let computed_part;
                match kept.get(&src.x) {
                    Some(k) => k.will_need(p1 * cols, (p2 - p1) * cols),
                    None => {
                        self.store.will_need_feature_rows(p1..p2);
                    }
                }
                let part = if computed {
                    let own: Vec<u32> = (p0 as u32..p1 as u32).collect();
                    computed_part = self.local(src.x, &own, &mut HashMap::new())?;
                    let t = computed_part.as_dense().ok_or_else(|| {
                        self.fail(src.x, crate::op::OpError::args("a dense value expected"))
                    })?;
                    &t.data[..]
                } else {
                    &data[p0 * cols..p1 * cols]
                };
                for f in &mut folds {
                    let sub = adjacency[&f.kind].column_part(&mut f.cursor, p0 as u32, p1 as u32);
                    if sub.structure.nnz() == 0 {
                        continue;
                    }
                    let nb = self.plan.neighbour[&f.id];
                    let inputs = self.other_inputs(f.id, nb);
                    let rb = RowBlock {
                        r0: c0,
                        n_nodes: p1 - p0,
                        x0: p0,
                        adjacency: &sub,
                        x: NodeRows::new(part, cols),
                        inputs: &inputs,
                    };
                    let b = Bindings {
                        nodes: block.rows,
                        entries: sub.structure.nnz(),
                    };
                    f.op.fold_part(&rb, &mut f.acc, &self.ctx(f.id, b))
                        .map_err(|e| self.fail(f.id, e))?;
                }
                let done = block.rows * (si * n + p1) / (sources * n);
                ticker.inc((done - ticked) as u64);
                ticked = done;
                p0 = p1;
            }
            for f in folds {
                let offsets = &adjacency[&f.kind].structure.offsets;
                let degree: Vec<u32> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
                let v =
                    f.op.finish(f.acc, &degree)
                        .map_err(|e| self.fail(f.id, e))?;
                let t = match v {
                    Value::Dense(t)
                        if t.rows == block.rows && t.cols == width(self.graph, f.id) =>
                    {
                        t
                    }
                    _ => {
                        return Err(self.fail(
                            f.id,
                            crate::op::OpError::args(format!(
                                "streamed evaluation: expected {} × {} for rows {c0}..{c1}",
                                block.rows,
                                width(self.graph, f.id)
                            )),
                        ))
                    }
                };
                out.insert(f.id, t);
            }
        }
        Ok(out)
    }

    /// The values of `work` (one level's nodes) at rows r0..r1; the streamed ops' rows
    /// come from `folded`, their chunk's outputs from row `c0`.
    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        kept: &HashMap<NodeId, Kept>,
        level: usize,
        work: &[NodeId],
        r0: usize,
        r1: usize,
        folded: &HashMap<NodeId, Arc<Tensor>>,
        c0: usize,
    ) -> Result<HashMap<NodeId, Value>> {
        let (graph, plan) = (self.graph, self.plan);
        let n = self.store.n_nodes();
        let block = Block::new(self.store, r0, r1)?;
        let mut adjacency: HashMap<AdjKind, SparseMat> = HashMap::new();
        let mut vals: HashMap<NodeId, Value> = HashMap::new();
        let own: Vec<u32> = (r0 as u32..r1 as u32).collect();
        for &id in work {
            let node = graph.node(id);
            let out = match plan.class[&id] {
                // Only as the output itself: a plan whose embedding is the features.
                Class::Features => {
                    Value::dense(gather_rows(self.features, self.store.n_features(), &own))
                }
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
                            Class::RowLocal | Class::Neighbour if plan.level[&src] == level => {
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
                        nodes: block.rows,
                        entries: block.indices.len(),
                    };
                    node.op
                        .forward(&refs, &self.ctx(id, b))
                        .map_err(|e| self.fail(id, e))?
                }
                Class::Neighbour | Class::BlockSparse => {
                    let nb = plan.neighbour[&id];
                    let (s, x) = (node.inputs[nb.adjacency], node.inputs[nb.x]);
                    if let Class::Adj(kind) = plan.class[&s] {
                        adjacency
                            .entry(kind)
                            .or_insert_with(|| block.adjacency(self.store, kind));
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
                        n_nodes: n,
                        x0: 0,
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
                    matches!(out.as_sparse(), Some(s) if s.structure.n_rows() == block.rows)
                }
                _ => matches!(
                    out.as_dense(),
                    Some(t) if t.rows == block.rows && t.cols == width(graph, id)
                ),
            };
            if !ok {
                return Err(self.fail(
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
    let n = store.n_nodes();
    // Out of core, the training step's recycled buffers go first, and the pass keeps few
    // (a block's values are a few MiB): its buffer is what the memory limit leaves beside
    // what the process holds. The step's cap comes back when the pass ends.
    struct PoolCap(usize);
    impl Drop for PoolCap {
        fn drop(&mut self) {
            crate::ir::recycle::set_capacity(self.0);
        }
    }
    let _pool = PoolCap(crate::ir::recycle::capacity());
    let mut pass_plan = PassPlan::new(store, graph, plan, opts)?;
    if pass_plan.out_of_core() {
        crate::ir::recycle::clear();
        crate::ir::recycle::set_capacity(PASS_POOL_BYTES);
        pass_plan = PassPlan::new(store, graph, plan, opts)?;
    }
    if pass_plan.out_of_core() {
        let line = pass_plan.to_string();
        let mut last = ANNOUNCED.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_deref() != Some(line.as_str()) {
            opts.progress.line(&line);
            *last = Some(line);
        }
    }
    let mut pass = Pass {
        store,
        graph,
        plan,
        source,
        params,
        statics: HashMap::new(),
        features: store.features(),
    };

    // Static values, once.
    for &id in &plan.order {
        if plan.class[&id] != Class::Static {
            continue;
        }
        let node = graph.node(id);
        let ins: Vec<&Value> = node.inputs.iter().map(|i| &pass.statics[i]).collect();
        let b = Bindings {
            nodes: 0,
            entries: 0,
        };
        let v = node
            .op
            .forward(&ins, &pass.ctx(id, b))
            .map_err(|e| pass.fail(id, e))?;
        pass.statics.insert(id, v);
    }

    // Kept matrices: in memory or in scratch files.
    let mut kept: HashMap<NodeId, Kept> = HashMap::new();
    for (k, &(id, cols)) in pass_plan.kept.iter().enumerate() {
        let file = pass_plan
            .scratch
            .as_ref()
            .map(|(dir, _)| dir.join(format!(".saintflow-infer-{}-{k}", std::process::id())));
        kept.insert(id, Kept::new(n, cols, file.as_deref())?);
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
    // The levels with work that is kept or is the output, each with its nodes (a level
    // of floating values alone is computed where it is read).
    let levels: Vec<(usize, Vec<NodeId>)> = (0..plan.levels)
        .map(|l| (l, work_of(l)))
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
    let block_rows = pass_plan.block_rows;
    for (li, (level, work)) in levels.iter().enumerate() {
        let level = *level;
        ticker.set_message(format!("layer {}/{}", li + 1, levels.len()));
        let stream = pass_plan.streams.iter().find(|s| s.level == level);
        let chunk_rows = stream.map_or(n.max(1), |s| s.chunk_rows);
        let mut c0 = 0;
        while c0 < n {
            let c1 = (c0 + chunk_rows).min(n);
            let folded = match stream {
                Some(s) => pass.fold_chunk(&kept, c0, c1, s, &ticker)?,
                None => HashMap::new(),
            };
            let mut r0 = c0;
            while r0 < c1 {
                let r1 = (r0 + block_rows).min(c1);
                let vals = pass.block(&kept, level, work, r0, r1, &folded, c0)?;
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
            c0 = c1;
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
    Ok(())
}
