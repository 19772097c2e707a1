//! The plan of a full-graph pass (issue 54: out of `train/blocked.rs`): [`InferOptions`]
//! (how blocked inference uses memory and disk) and [`PassPlan`].
//!
//! Before the pass, [`PassPlan`] says what will happen — the bytes kept and where, the
//! scratch disk's free space, the buffer, the parts and chunks, the bytes to read and
//! write — and refuses a pass that cannot work (kept values beyond the scratch disk's
//! free space), naming what to change. An out-of-core pass prints it as one line, and a
//! line with the bytes it read when it ends.

use std::path::PathBuf;

use super::levels::{width, BlockedPlan, Class};
use super::{InferError, Result};
use crate::ir::{Graph, NodeId};
use crate::store::GraphStore;

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
    /// with [`TrainOptions::memory_limit`](crate::train::TrainOptions::memory_limit)).
    pub memory_limit: crate::machine::MemoryLimit,
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
            memory_limit: crate::machine::MemoryLimit::Detect,
            progress: crate::progress::Progress::hidden(),
            buffer_bytes: None,
            part_rows: None,
            chunk_rows: None,
        }
    }
}

/// What one level streams: the neighbour ops whose X is read in parts of rows.
#[derive(Clone, Debug)]
pub(super) struct LevelStream {
    pub(super) level: usize,
    /// Output rows per chunk: the accumulators of every streamed op of the level.
    pub(super) chunk_rows: usize,
    pub(super) sources: Vec<StreamSource>,
}

/// One X read in parts, and the ops that fold it.
#[derive(Clone, Debug)]
pub(super) struct StreamSource {
    pub(super) x: NodeId,
    pub(super) cols: usize,
    pub(super) part_rows: usize,
    pub(super) ops: Vec<NodeId>,
    /// Larger than half the buffer (not only streamed because it floats).
    pub(super) large: bool,
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
    pub(super) kept: Vec<(NodeId, usize)>,
    kept_bytes: u64,
    /// The scratch directory and its free bytes, when kept values go to files.
    pub(super) scratch: Option<(PathBuf, Option<u64>)>,
    buffer_bytes: u64,
    pub(super) block_rows: usize,
    pub(super) streams: Vec<LevelStream>,
    /// Neighbour ops that read a large X in place by the neighbours' ids: label, X's bytes.
    in_place: Vec<(String, u64)>,
    pub(super) read_bytes: u64,
    write_bytes: u64,
}

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
        let buffer = buffer_bytes(opts);
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
                    if !flavours.contains(&plan.class[&a]) {
                        flavours.push(plan.class[&a]);
                    }
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
                // At most MAX_PART_ROWS: a chunk's rows sorted by part number a part's
                // columns in 24 bits.
                let most = n.clamp(1, super::parted::MAX_PART_ROWS);
                s.part_rows = opts.part_rows.unwrap_or(rows).clamp(1, most);
            }
            let acc_row = chunk_row_bytes(graph, &sources, &flavours, fanout, n);
            let rows = (buffer * ACC_SHARE / ACC_OF / acc_row.max(1) as u64) as usize;
            streams.push(LevelStream {
                level,
                chunk_rows: opts.chunk_rows.unwrap_or(rows).clamp(1, n.max(1)),
                sources,
            });
        }
        let keep = |whole: &[NodeId]| -> Vec<(NodeId, usize)> {
            plan.kept
                .iter()
                .filter(|&&id| !plan.floating(id) || whole.contains(&id))
                .map(|&id| (id, width(graph, id)))
                .collect()
        };
        let mut kept = keep(&whole);
        let mut kept_bytes: u64 = kept.iter().map(|&(_, c)| bytes(c)).sum();
        // The scratch directory's free space, asked once for both decisions below.
        let free = fs4::available_space(&opts.scratch_dir).ok();
        // A floating X streamed into more than one chunk is computed once and kept when
        // it is no wider than the features (issue 56): each chunk would otherwise read
        // the features again and repeat X's product; kept, each chunk reads X — where the
        // memory or the scratch disk has room for it beside the rest.
        let features = bytes(store.n_features());
        let again: Vec<NodeId> = streams
            .iter()
            .filter(|l| n.div_ceil(l.chunk_rows) > 1)
            .flat_map(|l| &l.sources)
            .filter(|s| plan.floating(s.x) && bytes(s.cols) <= features && !whole.contains(&s.x))
            .map(|s| s.x)
            .collect();
        if !again.is_empty() {
            let more = [whole.clone(), again].concat();
            let with = keep(&more);
            let with_bytes: u64 = with.iter().map(|&(_, c)| bytes(c)).sum();
            let room =
                with_bytes <= opts.memory_bytes as u64 || free.is_none_or(|f| f >= with_bytes);
            if room {
                (kept, kept_bytes) = (with, with_bytes);
            }
        }
        let on_disk = kept_bytes > opts.memory_bytes as u64;
        let scratch = on_disk.then(|| (opts.scratch_dir.clone(), free));
        if let Some((dir, Some(free))) = &scratch {
            if *free < kept_bytes {
                return Err(InferError::Infer(format!(
                    "the values kept between layers need {} of scratch space in {}, which has {} free: choose a directory on a larger disk with --scratch-dir, or give the pass enough memory to keep them there (--memory MIB, now {})",
                    crate::machine::human(kept_bytes.into()),
                    dir.display(),
                    crate::machine::human((*free).into()),
                    crate::machine::human(opts.memory_bytes as u128),
                )));
            }
        }
        let read_bytes = expected_reads(store, graph, plan, &streams, &in_place, &kept);
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

    /// The plan's decisions as text: its line without the scratch disk's free bytes,
    /// which move between two evaluations of a run whenever anything writes to that disk
    /// (a run's second evaluation announced the same plan again when another process
    /// wrote beside it). What tells one announced plan from another.
    pub fn decisions(&self) -> String {
        let mut key = self.clone();
        if let Some((_, free)) = &mut key.scratch {
            *free = None;
        }
        key.to_string()
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

/// What a streamed chunk holds per output row (the accumulators' share of the buffer is
/// divided by it): the rows' entries sorted by part (`parted::row_bytes`: 4 bytes each, an
/// eighth more of room to grow, a degree and the parts' index) — or, for a relation
/// flavour, as the store has them (4 bytes each and an offset) and its built adjacency (an
/// id and a value an entry) —, and for every op its accumulators, a cursor or offset, and
/// its cut of one part (8 bytes an entry for the part's share of the entries).
fn chunk_row_bytes(
    graph: &Graph,
    sources: &[StreamSource],
    flavours: &[Class],
    fanout: usize,
    n: usize,
) -> usize {
    let ops: usize = sources
        .iter()
        .map(|s| {
            let parts = n.div_ceil(s.part_rows.max(1)).max(1);
            s.ops
                .iter()
                .map(|&id| 4 * width(graph, id) + 8 + (8 * fanout).div_ceil(parts))
                .sum::<usize>()
        })
        .sum();
    let built = flavours
        .iter()
        .filter(|c| matches!(c, Class::Adj(k) if k.relation.is_some()))
        .count();
    let plain = flavours
        .iter()
        .any(|c| matches!(c, Class::Adj(k) if k.relation.is_none()));
    let sorted = if plain {
        super::parted::row_bytes(fanout)
    } else {
        0
    };
    let stored = if built > 0 { 4 * (fanout + 1) } else { 0 };
    ops + sorted + stored + built * (8 * fanout + 4)
}

/// The bytes a pass is expected to read: each streamed X once per chunk (the features'
/// part for an X computed from them), every large X read in place at least once, and a
/// kept value read at its own rows by a later level once.
fn expected_reads(
    store: &GraphStore,
    graph: &Graph,
    plan: &BlockedPlan,
    streams: &[LevelStream],
    in_place: &[(String, u64)],
    kept: &[(NodeId, usize)],
) -> u64 {
    let n = store.n_nodes();
    let bytes = |cols: usize| 4 * n as u64 * cols as u64;
    let features = bytes(store.n_features());
    let mut read_bytes: u64 = streams
        .iter()
        .flat_map(|l| {
            let chunks = n.div_ceil(l.chunk_rows) as u64;
            l.sources.iter().map(move |s| {
                let x = if plan.floating(s.x) && !kept.iter().any(|&(id, _)| id == s.x) {
                    features
                } else {
                    bytes(s.cols)
                };
                chunks * x
            })
        })
        .sum();
    read_bytes += in_place.iter().map(|(_, b)| b).sum::<u64>();
    for &(id, cols) in kept {
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
    read_bytes
}

/// The streaming buffer when none is given: half of what the memory limit (a cgroup's,
/// when the process runs in one; 2 GiB when there is none to read) leaves beside the
/// process's anonymous memory now, and at least 64 MiB.
/// Whether every neighbour op below the output's level reads an X that fits half the
/// buffer (as [`PassPlan::new`] decides what to stream): then computing a lower-level value
/// again at chosen rows (`BlockedPlan::at_chosen_rows`) reads its X from memory. Issue 56:
/// an X past it is read in place by the neighbours' ids, one page fault per row of a
/// scattered block (GraphSAGE's validation at Kronecker scale 27 under an 8 GiB cap re-read
/// the 17 GB of features at random to compute the first layer again at the scored rows).
pub(super) fn lower_levels_fit(
    store: &GraphStore,
    graph: &Graph,
    plan: &BlockedPlan,
    opts: &InferOptions,
) -> bool {
    let buffer = buffer_bytes(opts);
    let out = plan.level[&plan.output];
    plan.neighbour.iter().all(|(id, nb)| {
        let x = graph.node(*id).inputs[nb.x];
        plan.level[id] >= out || 4 * store.n_nodes() as u64 * width(graph, x) as u64 <= buffer / 2
    })
}

/// The buffer a pass streams through: `opts.buffer_bytes`, or half of what the memory
/// limit leaves beside the process.
fn buffer_bytes(opts: &InferOptions) -> u64 {
    opts.buffer_bytes
        .map_or_else(|| default_buffer(opts), |b| b as u64)
}

fn default_buffer(opts: &InferOptions) -> u64 {
    let limit = opts
        .memory_limit
        .resolve()
        .or_else(crate::machine::machine_memory)
        .map_or(2 << 30, |(b, _)| b);
    let used = crate::machine::anon_resident(std::process::id());
    (limit.saturating_sub(used) / 2).max(64 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(free: u64, buffer_bytes: u64) -> PassPlan {
        PassPlan {
            nodes: 1024,
            layers: 2,
            kept: vec![],
            kept_bytes: 1 << 20,
            scratch: Some((PathBuf::from("scratch"), Some(free))),
            buffer_bytes,
            block_rows: 1024,
            streams: vec![],
            in_place: vec![],
            read_bytes: 2 << 20,
            write_bytes: 1 << 20,
        }
    }

    /// Two plans that differ only in the scratch disk's free bytes are one plan; a
    /// different buffer is another; the printed line still states the free bytes.
    #[test]
    fn the_free_bytes_are_not_a_decision() {
        let (a, b) = (plan(45 << 30, 1 << 20), plan(44 << 30, 1 << 20));
        assert_ne!(a.to_string(), b.to_string());
        assert!(a.to_string().contains("free)"), "{a}");
        assert_eq!(a.decisions(), b.decisions());
        assert_ne!(a.decisions(), plan(45 << 30, 2 << 20).decisions());
    }
}
