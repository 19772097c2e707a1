//! Streaming X (issue 27; issue 54: out of `train/blocked.rs`): `Pass::fold_chunk`, a
//! chunk of a streamed level's output rows folded while X goes past in parts.
//!
//! Read in place, X is read row by row at the neighbours' ids: random reads, which for an X
//! larger than memory (a kept matrix of millions of rows, a store's features under a memory
//! cap) thrash the page cache and read the disk over and over. An op that folds
//! ([`NeighbourFold`](crate::op::NeighbourFold): a weighted sum, a maximum) over an
//! adjacency flavour is instead computed a *chunk* of output rows at a time, with the
//! chunk's accumulators in memory, while X goes past in *parts* of consecutive rows, in
//! ascending order, each part read sequentially once per chunk (the next part asked for
//! while one is folded); the chunk's entries are cut by column (a plain flavour's from
//! the rows sorted by part, [`Parted`]; a relation's from its built adjacency,
//! [`SparseMat::column_part_reusing`]) so that each part folds the entries whose neighbours it
//! holds. The store's rows are sorted, so the parts' entries in turn are each row's entries
//! in CSR order: the result is the in-place pass's, bit for bit. A floating X's part is
//! computed from the same part of the features. This is MariusGNN's idea (EuroSys'23: a
//! buffer of node partitions, the edge buckets between them, sequential reads) in its
//! simplest order: with the outputs' accumulators resident there is no second partition to
//! swap, so X is read ⌈N / chunk rows⌉ times and written never — except a floating X
//! streamed into more than one chunk, which is computed once and kept where there is
//! room (`PassPlan::new`), so that chunks do not read the features again. The buffer
//! ([`InferOptions::buffer_bytes`](super::InferOptions::buffer_bytes)) is half of what the
//! memory limit leaves beside the process: an X larger than half of it is streamed, a
//! smaller one read in place.

use std::collections::HashMap;
use std::sync::Arc;

use super::ahead::{Ahead, Source};
use super::block::{Block, EntryValues};
use super::kept::Kept;
use super::levels::AdjKey;
use super::levels::{width, Class};
use super::parted::{Parted, Spare};
use super::pass::Pass;
use super::plan::LevelStream;
use super::plan::StreamSource;
use super::Result;
use crate::ir::recycle::{self, recycle_value};
use crate::ir::{Bindings, NodeId, SparseMat, Tensor, Value};
use crate::op::AdjKind;
use crate::op::{NodeRows, RowBlock};

/// One streamed op of a chunk: its accumulators over the chunk's rows and, for a relation's
/// adjacency, where each row's entries stand.
struct Fold<'f> {
    id: NodeId,
    op: &'f dyn crate::op::NeighbourFold,
    entries: Entries,
    /// A relation's: where each row's next entry is (empty for a plain flavour).
    cursor: Vec<u32>,
    acc: Tensor,
    /// The last part's adjacency, whose buffers the next part refills.
    spare: Option<SparseMat>,
}

/// Where a streamed op's entries come from. A plain flavour is cut from the chunk's rows
/// sorted by part ([`Parted`]), its values and self-loops made at the cut: the chunk holds
/// about 4 bytes an entry, where a built adjacency beside the rows held 12, so a chunk
/// holds about twice the rows at GraphSAGE's width and X is read half as often. A
/// relation's adjacency (whose values depend on each entry's membership) is built whole
/// from the rows as the store has them ([`Block`]).
#[derive(Clone, Copy)]
enum Entries {
    Plain(AdjKind),
    Built(AdjKey),
}

impl Pass<'_> {
    /// The adjacency flavour a streamed op folds over.
    fn fold_key(&self, id: NodeId) -> AdjKey {
        let nb = self.plan.neighbour[&id];
        match self.plan.class[&self.graph.node(id).inputs[nb.adjacency]] {
            Class::Adj(key) => key,
            _ => unreachable!("only ops over an adjacency flavour stream"),
        }
    }

    /// The streamed ops' outputs at rows c0..c1: each source's X read in parts of rows,
    /// in ascending order, every part folded into the ops' accumulators. `spare`: the
    /// last chunk's buffers, which this chunk's refill, and where they are left.
    pub(super) fn fold_chunk(
        &self,
        kept: &HashMap<NodeId, Kept>,
        (c0, c1): (usize, usize),
        stream: &LevelStream,
        spare: &mut Spare,
        ticker: &crate::progress::Ticker,
    ) -> Result<HashMap<NodeId, Arc<Tensor>>> {
        let (n, rows) = (self.store.n_nodes(), c1 - c0);
        let ops = || stream.sources.iter().flat_map(|s| &s.ops);
        // The rows as the store has them only for a relation's adjacency.
        let block = match ops().any(|&id| self.fold_key(id).relation.is_some()) {
            true => Some(Block::refill(self.store, c0, c1, spare.block.take())?),
            false => None,
        };
        // The free-list's cap raised, while the chunk folds, to hold one part's computed
        // values: each part then refills the last one's buffers instead of faulting in
        // fresh pages (the kernel's zeroing of them was 44 % of a streamed pass's time at
        // Kronecker scale 25 under `memcap 2G`); the cap comes back when the chunk is
        // done. The part's values exist at once anyway, so the peak does not grow.
        let pool = recycle::CapacityGuard::new();
        let mut built: HashMap<AdjKey, SparseMat> = HashMap::new();
        let mut out = HashMap::new();
        // Progress: the chunk's rows once over all its parts.
        let (sources, mut ticked) = (stream.sources.len(), 0);
        let mut degrees = Vec::new();
        for (si, src) in stream.sources.iter().enumerate() {
            let computed = !kept.contains_key(&src.x)
                && !matches!(self.plan.class[&src.x], Class::Features | Class::Cached);
            let (data, cols) = if computed {
                (&[][..], src.cols)
            } else {
                self.whole(kept, src.x)
            };
            let mut folds = self.folds(src, cols, (rows, block.as_ref()), &mut built);
            let plain = |f: &Fold<'_>| matches!(f.entries, Entries::Plain(_));
            // The rows sorted by this source's parts, when a plain flavour folds it.
            let parted = match folds.iter().any(plain) {
                true => Some(Parted::new(
                    self.store,
                    (c0, c1),
                    src.part_rows,
                    spare.parted.take(),
                )?),
                false => None,
            };
            let per_entry = folds
                .iter()
                .any(|f| matches!(f.entries, Entries::Plain(k) if EntryValues::of(k).per_entry()));
            let mut p0 = 0;
            let mut own = Vec::new();
            // A kept X or the features: each part copied out of the map by a thread of its
            // own while the last one folds (the page faults, which read the disk, off the
            // folding threads; the fold's gathers from the copy's huge pages, not the
            // map's small ones), the kernel asked to read it as the copy starts. A floating
            // X: each part computed from the features' part; a cached one: in memory.
            let in_place = !computed && self.plan.class[&src.x] != Class::Cached;
            std::thread::scope(|scope| -> Result<()> {
                // A value kept in memory is folded where it is.
                let source = match kept.get(&src.x) {
                    Some(k) if k.in_file() => Some(Source::Kept(k)),
                    Some(_) => None,
                    None => Some(Source::Features(self.store)),
                };
                let mut ahead = source
                    .filter(|_| in_place)
                    .map(|s| Ahead::start(scope, s, (data, cols), src.part_rows))
                    .transpose()?;
                while p0 < n {
                    let p1 = (p0 + src.part_rows).min(n);
                    let copy = ahead.as_mut().map(Ahead::take).transpose()?;
                    let mut memo = HashMap::new();
                    let computed_part = if computed {
                        own.clear();
                        own.extend(p0 as u32..p1 as u32);
                        Some(self.local(src.x, &own, &mut memo)?)
                    } else {
                        None
                    };
                    let part = match (&computed_part, &copy) {
                        (Some(v), _) => {
                            let t = v.as_dense().ok_or_else(|| {
                                self.fail(src.x, crate::op::OpError::args("a dense value expected"))
                            })?;
                            &t.data[..]
                        }
                        (None, Some(copy)) => &copy[..],
                        (None, None) => &data[p0 * cols..p1 * cols],
                    };
                    if per_entry {
                        // The part's nodes' degrees, read once for every fold's values.
                        let o = &self.store.full().offsets()[p0..=p1];
                        degrees.clear();
                        degrees.extend(o.windows(2).map(|w| (w[1] - w[0]) as f32));
                    }
                    for f in &mut folds {
                        let (q0, q1) = (p0 as u32, p1 as u32);
                        let sub = match (f.entries, &parted) {
                            (Entries::Plain(kind), Some(parted)) => {
                                parted.part(kind, p0 / src.part_rows, &degrees, f.spare.take())
                            }
                            (Entries::Built(key), _) => built[&key].column_part_reusing(
                                &mut f.cursor,
                                q0,
                                q1,
                                f.spare.take(),
                            ),
                            (Entries::Plain(_), None) => unreachable!("sorted by part above"),
                        };
                        self.fold_part(f, sub, (p0, p1), (c0, rows), part, cols)?;
                    }
                    // The part's computed values and its copy back to the free-list for the
                    // next part (the memo holds the last reference to each once the part is
                    // dropped), the list's cap raised to hold one part's.
                    drop(computed_part);
                    let copied = copy.as_ref().map_or(0, |c| 4 * c.capacity());
                    let bytes: usize = memo.values().map(dense_bytes).sum();
                    pool.hold_more(bytes + copied);
                    memo.into_values().for_each(recycle_value);
                    if let Some(c) = copy {
                        recycle::give(c);
                    }
                    let done = rows * (si * n + p1) / (sources * n);
                    ticker.inc((done - ticked) as u64);
                    ticked = done;
                    p0 = p1;
                }
                Ok(())
            })?;
            let stored = parted.as_ref().map(|p| &p.degree[..]);
            for f in folds {
                let (id, t) = self.finish_fold(f, stored, &built, c0, c1)?;
                out.insert(id, t);
            }
            spare.parted = parted.or(spare.parted.take());
        }
        spare.block = block;
        Ok(out)
    }

    /// The folds of one streamed source's ops over the chunk's rows, a relation's
    /// adjacency built once for the chunk into `built`.
    /// (`block`: the chunk's `rows` as the store has them, read when a relation folds.)
    fn folds<'s>(
        &'s self,
        src: &StreamSource,
        cols: usize,
        (rows, block): (usize, Option<&Block>),
        built: &mut HashMap<AdjKey, SparseMat>,
    ) -> Vec<Fold<'s>> {
        let mut folds = Vec::new();
        for &id in &src.ops {
            let node = self.graph.node(id);
            let key = self.fold_key(id);
            let (entries, cursor) = match (key.relation, block) {
                (None, _) => (Entries::Plain(key.kind), Vec::new()),
                (Some(_), Some(block)) => {
                    let a = built
                        .entry(key)
                        .or_insert_with(|| block.adjacency(self.store, key));
                    (Entries::Built(key), a.structure.offsets[..rows].to_vec())
                }
                (Some(_), None) => unreachable!("a relation's fold reads the rows"),
            };
            let op = node
                .op
                .as_neighbour()
                .and_then(|o| o.fold())
                .expect("only folds stream");
            folds.push(Fold {
                id,
                op,
                entries,
                cursor,
                acc: op.start(rows, cols),
                spare: None,
            });
        }
        folds
    }

    /// Folds one part's entries `sub` (X's rows p0..p1 in `part`) into `f`'s accumulators
    /// over the chunk's `rows` rows from c0; `sub`'s buffers kept for the next part.
    fn fold_part(
        &self,
        f: &mut Fold<'_>,
        sub: SparseMat,
        (p0, p1): (usize, usize),
        (c0, rows): (usize, usize),
        part: &[f32],
        cols: usize,
    ) -> Result<()> {
        if sub.structure.nnz() > 0 {
            let nb = self.plan.neighbour[&f.id];
            let inputs = self.other_inputs(f.id, nb);
            let rb = RowBlock {
                r0: c0,
                ids: None,
                n_nodes: p1 - p0,
                x0: p0,
                adjacency: &sub,
                x: NodeRows::new(part, cols),
                inputs: &inputs,
            };
            let b = Bindings {
                nodes: rows,
                entries: sub.structure.nnz(),
                pairs: 0,
            };
            f.op.fold_part(&rb, &mut f.acc, &self.ctx(f.id, b))
                .map_err(|e| self.fail(f.id, e))?;
        }
        f.spare = Some(sub);
        Ok(())
    }

    /// A streamed op's output at the chunk's rows c0..c1 from its accumulators, checked
    /// against the op's width; `stored`: the rows' degrees in the store (for a plain
    /// flavour).
    fn finish_fold(
        &self,
        f: Fold<'_>,
        stored: Option<&[u32]>,
        built: &HashMap<AdjKey, SparseMat>,
        c0: usize,
        c1: usize,
    ) -> Result<(NodeId, Arc<Tensor>)> {
        let rows = c1 - c0;
        let degree: Vec<u32> = match (f.entries, stored) {
            (Entries::Plain(kind), Some(stored)) => {
                let loop_ = u32::from(kind.self_loops());
                stored.iter().map(|&d| d + loop_).collect()
            }
            (Entries::Plain(_), None) => unreachable!("a plain fold's rows were sorted by part"),
            (Entries::Built(key), _) => built[&key]
                .structure
                .offsets
                .windows(2)
                .map(|w| w[1] - w[0])
                .collect(),
        };
        let v =
            f.op.finish(f.acc, &degree)
                .map_err(|e| self.fail(f.id, e))?;
        match v {
            Value::Dense(t) if t.rows == rows && t.cols == width(self.graph, f.id) => Ok((f.id, t)),
            _ => Err(self.fail(
                f.id,
                crate::op::OpError::args(format!(
                    "streamed evaluation: expected {} × {} for rows {c0}..{c1}",
                    rows,
                    width(self.graph, f.id)
                )),
            )),
        }
    }
}

/// The bytes of a value's dense buffer (0 for other values).
fn dense_bytes(v: &Value) -> usize {
    v.as_dense().map_or(0, |t| 4 * t.data.len())
}
