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
//! while one is folded); the chunk's entries are cut by column (`Block::column_part`
//! from the rows' neighbour ids for a plain flavour, [`SparseMat::column_part`] from a
//! relation's built adjacency) so that each part folds the entries whose neighbours it
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

use rayon::prelude::*;

use super::block::{Block, EntryValues};
use super::kept::Kept;
use super::levels::AdjKey;
use super::levels::{width, Class};
use super::pass::Pass;
use super::plan::LevelStream;
use super::plan::StreamSource;
use super::Result;
use crate::ir::recycle::{self, recycle_value};
use crate::ir::{Bindings, NodeId, SparseMat, Tensor, Value};
use crate::op::AdjKind;
use crate::op::{NodeRows, RowBlock};

/// One streamed op of a chunk: its accumulators over the chunk's rows and where each row's
/// entries stand.
struct Fold<'f> {
    id: NodeId,
    op: &'f dyn crate::op::NeighbourFold,
    entries: Entries,
    cursor: Vec<u32>,
    acc: Tensor,
    /// The last part's adjacency, whose buffers the next part refills.
    spare: Option<SparseMat>,
}

/// Where a streamed op's entries come from. A plain flavour is cut from the chunk's rows
/// themselves, its values and self-loops made at the cut ([`Block::column_part`]): the
/// chunk holds 4 bytes an entry, where a built adjacency beside the rows held 12, so a
/// chunk holds about twice the rows at GraphSAGE's width and X is read half as often. A
/// relation's adjacency (whose values depend on each entry's membership) is built whole.
#[derive(Clone, Copy)]
enum Entries {
    Plain(AdjKind),
    Built(AdjKey),
}

/// Rows a job of [`Block::column_part`] cuts (a few in the unit tests, so that their
/// small blocks are cut by several jobs).
#[cfg(not(test))]
const CUT_ROWS: usize = 1 << 15;
#[cfg(test)]
const CUT_ROWS: usize = 16;

impl Block {
    /// The block's entries in the plain flavour `kind` whose neighbours are in `p0..p1`,
    /// as [`Block::adjacency`] has them — the self-loop where v sorts, values from the
    /// full graph's degrees (`degrees[w - p0]` for a neighbour w, read by the per-entry
    /// norms only) — with columns numbered from p0; `cursor[i]` is where row i's entries
    /// stand in the block, moved past the part's. Into `spare`'s buffers; ranges of rows
    /// in parallel, each row counted first, then every range filling its own entries.
    fn column_part(
        &self,
        kind: AdjKind,
        cursor: &mut [u32],
        (p0, p1): (u32, u32),
        degrees: &[f32],
        spare: Option<SparseMat>,
    ) -> SparseMat {
        let rows = self.rows;
        let (mut offsets, mut indices, mut values) = SparseMat::buffers(spare, rows);
        let (ev, loops) = (EntryValues::of(kind), kind.self_loops());
        let (norm, per_entry) = (ev.norm, ev.per_entry());
        // Whether row i's self-loop falls in this part.
        let own = |i: usize| loops && (p0..p1).contains(&self.id(i));
        offsets.resize(rows + 1, 0);
        offsets[1..]
            .par_chunks_mut(CUT_ROWS)
            .zip(cursor.par_chunks(CUT_ROWS))
            .enumerate()
            .for_each(|(r, (count, cur))| {
                for (k, (n, &c)) in count.iter_mut().zip(cur).enumerate() {
                    let i = r * CUT_ROWS + k;
                    let row = &self.indices[c as usize..self.offsets[i + 1] as usize];
                    let take = row.iter().position(|&w| w >= p1).unwrap_or(row.len());
                    *n = (take + usize::from(own(i))) as u32;
                }
            });
        let mut total = 0;
        for o in &mut offsets[1..] {
            total += *o;
            *o = total;
        }
        indices.resize(total as usize, 0);
        values.resize(total as usize, 0.0);
        let mut jobs = Vec::with_capacity(rows.div_ceil(CUT_ROWS));
        let (mut ind, mut val, mut cur) = (&mut indices[..], &mut values[..], &mut cursor[..]);
        for r0 in (0..rows).step_by(CUT_ROWS) {
            let r1 = (r0 + CUT_ROWS).min(rows);
            let len = (offsets[r1] - offsets[r0]) as usize;
            let (i, rest) = std::mem::take(&mut ind).split_at_mut(len);
            ind = rest;
            let (v, rest) = std::mem::take(&mut val).split_at_mut(len);
            val = rest;
            let (c, rest) = std::mem::take(&mut cur).split_at_mut(r1 - r0);
            cur = rest;
            jobs.push((r0, i, v, c));
        }
        let offsets_ = &offsets;
        jobs.into_par_iter().for_each(|(r0, ind, val, cur)| {
            let mut at = 0;
            for (k, c) in cur.iter_mut().enumerate() {
                let i = r0 + k;
                let looped = own(i);
                let take = (offsets_[i + 1] - offsets_[i]) as usize - usize::from(looped);
                let row = &self.indices[*c as usize..*c as usize + take];
                let dv = ev.degree((self.offsets[i + 1] - self.offsets[i]) as f32);
                let own_value = norm.value(dv, dv);
                let put = |ind: &mut [u32], val: &mut [f32], at: &mut usize, part: &[u32]| {
                    for (j, &w) in part.iter().enumerate() {
                        ind[*at + j] = w - p0;
                        val[*at + j] = if per_entry {
                            norm.value(dv, ev.degree(degrees[(w - p0) as usize]))
                        } else {
                            own_value
                        };
                    }
                    *at += part.len();
                };
                if looped {
                    let v = self.id(i);
                    let split = row.partition_point(|&w| w < v);
                    put(ind, val, &mut at, &row[..split]);
                    (ind[at], val[at]) = (v - p0, own_value);
                    at += 1;
                    put(ind, val, &mut at, &row[split..]);
                } else {
                    put(ind, val, &mut at, row);
                }
                *c += take as u32;
            }
        });
        SparseMat::csr(offsets, indices, values, 1)
    }
}

impl Pass<'_> {
    /// The streamed ops' outputs at rows c0..c1: each source's X read in parts of rows,
    /// in ascending order, every part folded into the ops' accumulators. `spare`: the
    /// last chunk's rows, whose buffers this chunk's refill, and where they are left.
    pub(super) fn fold_chunk(
        &self,
        kept: &HashMap<NodeId, Kept>,
        (c0, c1): (usize, usize),
        stream: &LevelStream,
        spare: &mut Option<Block>,
        ticker: &crate::progress::Ticker,
    ) -> Result<HashMap<NodeId, Arc<Tensor>>> {
        let n = self.store.n_nodes();
        let block = Block::refill(self.store, c0, c1, spare.take())?;
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
            let mut folds = self.folds(src, cols, &block, &mut built);
            let per_entry = folds
                .iter()
                .any(|f| matches!(f.entries, Entries::Plain(k) if EntryValues::of(k).per_entry()));
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
                if per_entry {
                    // The part's nodes' degrees, read once for every fold's values.
                    let o = &self.store.full().offsets()[p0..=p1];
                    degrees.clear();
                    degrees.extend(o.windows(2).map(|w| (w[1] - w[0]) as f32));
                }
                for f in &mut folds {
                    let (q0, q1) = (p0 as u32, p1 as u32);
                    let sub = match f.entries {
                        Entries::Plain(kind) => block.column_part(
                            kind,
                            &mut f.cursor,
                            (q0, q1),
                            &degrees,
                            f.spare.take(),
                        ),
                        Entries::Built(key) => {
                            built[&key].column_part_reusing(&mut f.cursor, q0, q1, f.spare.take())
                        }
                    };
                    self.fold_part(f, sub, (p0, p1), (c0, block.rows), part, cols)?;
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
                let (id, t) = self.finish_fold(f, &block, &built, c0, c1)?;
                out.insert(id, t);
            }
        }
        *spare = Some(block);
        Ok(out)
    }

    /// The folds of one streamed source's ops over the chunk's rows, a relation's
    /// adjacency built once for the chunk into `built`.
    fn folds<'s>(
        &'s self,
        src: &StreamSource,
        cols: usize,
        block: &Block,
        built: &mut HashMap<AdjKey, SparseMat>,
    ) -> Vec<Fold<'s>> {
        let mut folds = Vec::new();
        for &id in &src.ops {
            let node = self.graph.node(id);
            let nb = self.plan.neighbour[&id];
            let Class::Adj(key) = self.plan.class[&node.inputs[nb.adjacency]] else {
                unreachable!("only ops over an adjacency flavour stream")
            };
            let (entries, cursor) = match key.relation {
                None => (
                    Entries::Plain(key.kind),
                    block.offsets[..block.rows].to_vec(),
                ),
                Some(_) => {
                    let a = built
                        .entry(key)
                        .or_insert_with(|| block.adjacency(self.store, key));
                    (
                        Entries::Built(key),
                        a.structure.offsets[..block.rows].to_vec(),
                    )
                }
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
                acc: op.start(block.rows, cols),
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

    /// A streamed op's output at the chunk's rows c0..c1 from its accumulators (`rows` of
    /// them), checked against the op's width.
    fn finish_fold(
        &self,
        f: Fold<'_>,
        block: &Block,
        built: &HashMap<AdjKey, SparseMat>,
        c0: usize,
        c1: usize,
    ) -> Result<(NodeId, Arc<Tensor>)> {
        let rows = block.rows;
        let degree: Vec<u32> = match f.entries {
            Entries::Plain(kind) => {
                let loop_ = u32::from(kind.self_loops());
                block
                    .offsets
                    .windows(2)
                    .map(|w| w[1] - w[0] + loop_)
                    .collect()
            }
            Entries::Built(key) => built[&key]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Progress;
    use crate::store::gen::{generate_kronecker, KroneckerSpec};
    use crate::store::GraphStore;

    /// Cut part by part, a chunk's rows in every plain flavour are the adjacency the
    /// in-memory blocks build ([`Block::adjacency`]), entry for entry and bit for bit:
    /// the self-loop in the part that holds the row's own node, where it sorts; the
    /// per-entry norms' values from the part's degrees. Parts of one row, of a few, and
    /// the whole graph; chunks at the start, the middle and the end.
    #[test]
    fn a_chunks_parts_in_every_plain_flavour_are_its_built_adjacency() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("g.sf");
        let spec = KroneckerSpec {
            scale: 8,
            degree: 6.0,
            n_features: 2,
            seed: 56,
            ..KroneckerSpec::default()
        };
        generate_kronecker(&spec, &path, true, &Progress::hidden()).unwrap();
        let store = GraphStore::open(&path).unwrap();
        let n = store.n_nodes();
        let full = store.full();
        for (c0, c1) in [(0, n), (17, 90), (n - 5, n)] {
            let mut spare_block = None;
            let block = Block::refill(&store, c0, c1, spare_block.take()).unwrap();
            for kind in AdjKind::ALL {
                let want = block.adjacency(
                    &store,
                    AdjKey {
                        kind,
                        relation: None,
                    },
                );
                let ws = &want.structure;
                for part in [1, 7, 64, n] {
                    let mut cursor = block.offsets[..block.rows].to_vec();
                    let mut rows = vec![Vec::new(); block.rows];
                    let mut spare = None;
                    for p0 in (0..n).step_by(part) {
                        let p1 = (p0 + part).min(n);
                        let degrees: Vec<f32> =
                            (p0..p1).map(|v| full.degree(v as u32) as f32).collect();
                        let sub = block.column_part(
                            kind,
                            &mut cursor,
                            (p0 as u32, p1 as u32),
                            &degrees,
                            spare.take(),
                        );
                        let st = &sub.structure;
                        for (i, row) in rows.iter_mut().enumerate() {
                            for k in st.offsets[i] as usize..st.offsets[i + 1] as usize {
                                let v = sub.values.data[k].to_bits();
                                row.push((st.indices[k] + p0 as u32, v));
                            }
                        }
                        spare = Some(sub);
                    }
                    for (i, row) in rows.iter().enumerate() {
                        let (lo, hi) = (ws.offsets[i] as usize, ws.offsets[i + 1] as usize);
                        let built: Vec<(u32, u32)> = (lo..hi)
                            .map(|k| (ws.indices[k], want.values.data[k].to_bits()))
                            .collect();
                        assert_eq!(
                            row, &built,
                            "{kind:?}, rows {c0}..{c1}, parts of {part}: row {i}"
                        );
                        assert_eq!(cursor[i], block.offsets[i + 1], "row {i} consumed");
                    }
                }
            }
        }
    }
}
