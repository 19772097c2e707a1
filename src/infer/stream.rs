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
//! while one is folded); the chunk's adjacency is cut by column
//! ([`SparseMat::column_part`]) so that each part folds the entries whose neighbours it
//! holds. The store's rows are sorted, so the parts' entries in turn are each row's entries
//! in CSR order: the result is the in-place pass's, bit for bit. A floating X's part is
//! computed from the same part of the features. This is MariusGNN's idea (EuroSys'23: a
//! buffer of node partitions, the edge buckets between them, sequential reads) in its
//! simplest order: with the outputs' accumulators resident there is no second partition to
//! swap, so X is read ⌈N / chunk rows⌉ times and written never. The buffer
//! ([`InferOptions::buffer_bytes`](super::InferOptions::buffer_bytes)) is half of what the
//! memory limit leaves beside the process: an X larger than half of it is streamed, a
//! smaller one read in place.

use std::collections::HashMap;
use std::sync::Arc;

use super::kept::Kept;
use super::levels::AdjKey;
use super::levels::{width, Class};
use super::pass::{Block, Pass};
use super::plan::LevelStream;
use super::Result;
use crate::ir::recycle::{self, recycle_value};
use crate::ir::{Bindings, NodeId, SparseMat, Tensor, Value};
use crate::op::{NodeRows, RowBlock};

/// One streamed op of a chunk: its accumulators over the chunk's rows and where each row's
/// entries stand.
struct Fold<'f> {
    id: NodeId,
    op: &'f dyn crate::op::NeighbourFold,
    kind: AdjKey,
    cursor: Vec<u32>,
    acc: Tensor,
    /// The last part's adjacency, whose buffers the next part refills.
    spare: Option<SparseMat>,
}

impl Pass<'_> {
    /// The streamed ops' outputs at rows c0..c1: each source's X read in parts of rows,
    /// in ascending order, every part folded into the ops' accumulators.
    pub(super) fn fold_chunk(
        &self,
        kept: &HashMap<NodeId, Kept>,
        c0: usize,
        c1: usize,
        stream: &LevelStream,
        ticker: &crate::progress::Ticker,
    ) -> Result<HashMap<NodeId, Arc<Tensor>>> {
        let n = self.store.n_nodes();
        let block = Block::new(self.store, c0, c1)?;
        // The free-list's cap raised, while the chunk folds, to hold one part's computed
        // values: each part then refills the last one's buffers instead of faulting in
        // fresh pages (the kernel's zeroing of them was 44 % of a streamed pass's time at
        // Kronecker scale 25 under `memcap 2G`); the cap comes back when the chunk is
        // done. The part's values exist at once anyway, so the peak does not grow.
        let pool = recycle::CapacityGuard::new();
        let mut adjacency: HashMap<AdjKey, SparseMat> = HashMap::new();
        let mut out = HashMap::new();
        // Progress: the chunk's rows once over all its parts.
        let (sources, mut ticked) = (stream.sources.len(), 0);
        for (si, src) in stream.sources.iter().enumerate() {
            let computed = !kept.contains_key(&src.x)
                && !matches!(self.plan.class[&src.x], Class::Features | Class::Cached);
            let (data, cols) = if computed {
                (&[][..], src.cols)
            } else {
                self.whole(kept, src.x)
            };
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
                    spare: None,
                });
            }
            let mut p0 = 0;
            let mut own = Vec::new();
            while p0 < n {
                let p1 = (p0 + src.part_rows).min(n);
                let p2 = (p1 + src.part_rows).min(n);
                // A kept X or the features: read in place, the next part asked for now; a
                // floating X: computed from the features' part.
                match kept.get(&src.x) {
                    Some(k) => k.will_need(p1 * cols, (p2 - p1) * cols),
                    None if self.plan.class[&src.x] == Class::Cached => {}
                    None => {
                        self.store.will_need_feature_rows(p1..p2);
                    }
                }
                let mut memo = HashMap::new();
                let computed_part = if computed {
                    own.clear();
                    own.extend(p0 as u32..p1 as u32);
                    Some(self.local(src.x, &own, &mut memo)?)
                } else {
                    None
                };
                let part = match &computed_part {
                    Some(v) => {
                        let t = v.as_dense().ok_or_else(|| {
                            self.fail(src.x, crate::op::OpError::args("a dense value expected"))
                        })?;
                        &t.data[..]
                    }
                    None => &data[p0 * cols..p1 * cols],
                };
                for f in &mut folds {
                    let sub = adjacency[&f.kind].column_part_reusing(
                        &mut f.cursor,
                        p0 as u32,
                        p1 as u32,
                        f.spare.take(),
                    );
                    if sub.structure.nnz() == 0 {
                        f.spare = Some(sub);
                        continue;
                    }
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
                        nodes: block.rows,
                        entries: sub.structure.nnz(),
                        pairs: 0,
                    };
                    f.op.fold_part(&rb, &mut f.acc, &self.ctx(f.id, b))
                        .map_err(|e| self.fail(f.id, e))?;
                    f.spare = Some(sub);
                }
                // The part's computed values back to the free-list for the next part (the
                // memo holds the last reference to each once the part is dropped), the
                // list's cap raised to hold one part's.
                drop(computed_part);
                let bytes: usize = memo.values().map(dense_bytes).sum();
                pool.hold_more(bytes);
                memo.into_values().for_each(recycle_value);
                let done = block.rows * (si * n + p1) / (sources * n);
                ticker.inc((done - ticked) as u64);
                ticked = done;
                p0 = p1;
            }
            for f in folds {
                let (id, t) = self.finish_fold(f, &adjacency, block.rows, c0, c1)?;
                out.insert(id, t);
            }
        }
        Ok(out)
    }

    /// A streamed op's output at the chunk's rows c0..c1 from its accumulators (`rows` of
    /// them), checked against the op's width.
    fn finish_fold(
        &self,
        f: Fold<'_>,
        adjacency: &HashMap<AdjKey, SparseMat>,
        rows: usize,
        c0: usize,
        c1: usize,
    ) -> Result<(NodeId, Arc<Tensor>)> {
        let offsets = &adjacency[&f.kind].structure.offsets;
        let degree: Vec<u32> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
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
