//! A pass's blocks of rows (split from `pass.rs`): [`Block`], a block's adjacency rows
//! copied from the full graph with every id checked, and the adjacency flavours built on
//! them ([`Block::adjacency`], normalised by full-graph degrees; a relation's holds its
//! entries alone); [`EntryValues`], the one formula of a plain flavour's values; and
//! [`BlockCache`], the blocks and adjacencies a [`FullGraph`](super::FullGraph) keeps
//! across its passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::levels::AdjKey;
use super::Result;
use crate::ir::op::AdjNorm;
use crate::ir::SparseMat;
use crate::op::builtin::member_flags;
use crate::op::AdjKind;
use crate::store::{GraphStore, StoreError};

/// One block of rows r0..r1, or of chosen rows (`ids`): their adjacency rows with the
/// full graph's node ids.
pub(super) struct Block {
    pub(super) r0: usize,
    pub(super) ids: Option<Vec<u32>>,
    pub(super) rows: usize,
    pub(super) offsets: Vec<u32>,
    pub(super) indices: Vec<u32>,
}

impl Block {
    /// Rows r0..r1 of the full graph; a neighbour id ≥ N (a corrupt store read before
    /// `check`) is an error naming the entry (one comparison per copied id).
    pub(super) fn new(store: &GraphStore, r0: usize, r1: usize) -> Result<Block> {
        Block::refill(store, r0, r1, None)
    }

    /// [`Block::new`] into the buffers of `spare` (an earlier chunk's): a streamed level
    /// copies every chunk's rows, and fresh pages for each are the kernel's to zero.
    pub(super) fn refill(
        store: &GraphStore,
        r0: usize,
        r1: usize,
        spare: Option<Block>,
    ) -> Result<Block> {
        let full = store.full();
        let base = full.offsets()[r0];
        // The block's adjacency counts its entries (and a self-loop per row) in u32.
        crate::sample::subgraph_offset((full.offsets()[r1] - base) as usize + (r1 - r0))?;
        let (mut offsets, mut indices) =
            spare.map_or_else(Default::default, |b| (b.offsets, b.indices));
        offsets.clear();
        offsets.extend(full.offsets()[r0..=r1].iter().map(|&o| (o - base) as u32));
        indices.clear();
        indices.extend_from_slice(&full.indices()[base as usize..full.offsets()[r1] as usize]);
        Block {
            r0,
            ids: None,
            rows: r1 - r0,
            offsets,
            indices,
        }
        .checked(full.n_nodes())
    }

    /// The rows `ids` (ascending node ids) of the full graph, checked as [`Block::new`]'s.
    pub(super) fn at(store: &GraphStore, ids: &[u32]) -> Result<Block> {
        let full = store.full();
        let o = full.offsets();
        let entries: u64 = ids.iter().map(|&v| o[v as usize + 1] - o[v as usize]).sum();
        crate::sample::subgraph_offset(entries as usize + ids.len())?;
        let (mut offsets, mut indices) = (Vec::with_capacity(ids.len() + 1), Vec::new());
        offsets.push(0u32);
        indices.reserve(entries as usize);
        for &v in ids {
            let v = v as usize;
            indices.extend_from_slice(&full.indices()[o[v] as usize..o[v + 1] as usize]);
            offsets.push(indices.len() as u32);
        }
        Block {
            r0: ids.first().map_or(0, |&v| v as usize),
            ids: Some(ids.to_vec()),
            rows: ids.len(),
            offsets,
            indices,
        }
        .checked(full.n_nodes())
    }

    /// Row i's node id.
    pub(super) fn id(&self, i: usize) -> u32 {
        match &self.ids {
            Some(ids) => ids[i],
            None => (self.r0 + i) as u32,
        }
    }

    /// A neighbour id ≥ N (a corrupt store read before `check`) is an error naming the
    /// entry (one comparison per copied id); so is a row not sorted, the order streaming
    /// X in parts relies on.
    fn checked(self, n: usize) -> Result<Block> {
        let n = n as u64;
        let offsets = &self.offsets;
        let row_of = |k: usize| self.id(offsets.partition_point(|&o| o as usize <= k) - 1);
        if let Some(k) = self.indices.iter().position(|&v| u64::from(v) >= n) {
            return Err(StoreError::neighbor_out_of_range(row_of(k), self.indices[k], n).into());
        }
        for w in offsets.windows(2) {
            let row = &self.indices[w[0] as usize..w[1] as usize];
            if let Some(k) = row.windows(2).position(|p| p[1] <= p[0]) {
                let at = w[0] as usize + k + 1;
                return Err(StoreError::row_not_sorted(row_of(at), self.indices[at]).into());
            }
        }
        Ok(self)
    }

    /// The block's adjacency in flavour `key`, normalised by full-graph degrees: its rows
    /// with the full graph's ids as columns (rows × N).
    pub(super) fn adjacency(&self, store: &GraphStore, key: AdjKey) -> SparseMat {
        if let Some(r) = key.relation {
            return self.relation_adjacency(store, key.kind, r as usize);
        }
        let kind = key.kind;
        let full = store.full();
        let deg = |v: u32| full.degree(v) as f32;
        let ev = EntryValues::of(kind);
        let (mut offsets, mut indices, mut values) = (vec![0u32], Vec::new(), Vec::new());
        for i in 0..self.rows {
            let row = &self.indices[self.offsets[i] as usize..self.offsets[i + 1] as usize];
            let v = self.id(i);
            let dv = ev.degree(deg(v));
            let norm = ev.norm;
            let fill = |values: &mut Vec<f32>, part: &[u32]| {
                if ev.per_entry() {
                    values.extend(part.iter().map(|&w| norm.value(dv, ev.degree(deg(w)))));
                } else {
                    values.resize(values.len() + part.len(), norm.value(dv, dv));
                }
            };
            if kind.self_loops() {
                // The self loop goes where v sorts.
                let at = row.partition_point(|&w| w < v);
                indices.extend_from_slice(&row[..at]);
                fill(&mut values, &row[..at]);
                indices.push(v);
                values.push(norm.value(dv, dv));
                indices.extend_from_slice(&row[at..]);
                fill(&mut values, &row[at..]);
            } else {
                indices.extend_from_slice(row);
                fill(&mut values, row);
            }
            offsets.push(indices.len() as u32);
        }
        // No transpose permutation: the analysis admits no transposed product.
        SparseMat::csr(offsets, indices, values, 1)
    }

    /// Relation r's adjacency in flavour `kind` at the block's rows, as the step's
    /// `rel_adj` has it on the whole graph (`op::builtin::RelAdjacency`): r's entries alone
    /// (each row's entries of r's destination type that are in r), d(u) = |N_u^r|,
    /// d(v) = |N_v^{r⁻¹}| (≥ 1). The ids come from the block's checked rows.
    fn relation_adjacency(&self, store: &GraphStore, kind: AdjKind, r: usize) -> SparseMat {
        let (fwd, rev) = (store.relation(r), store.relation(store.relation(r).reverse));
        let dst = store.type_range(fwd.dst);
        let norm = kind.norm();
        let (mut offsets, mut indices, mut values) = (vec![0u32], Vec::new(), Vec::new());
        let mut flags = Vec::new();
        for i in 0..self.rows {
            let row = &self.indices[self.offsets[i] as usize..self.offsets[i + 1] as usize];
            let lo = row.partition_point(|&w| w < dst.start);
            let part = &row[lo..lo + row[lo..].partition_point(|&w| w < dst.end)];
            let du = (member_flags(part, fwd.csr.row(self.id(i)), &mut flags) as f32).max(1.0);
            for (&w, _) in part.iter().zip(&flags).filter(|(_, &in_r)| in_r) {
                indices.push(w);
                values.push(norm.value(du, (rev.csr.degree(w) as f32).max(1.0)));
            }
            offsets.push(indices.len() as u32);
        }
        SparseMat::csr(offsets, indices, values, 1)
    }
}

/// How a plain flavour's entry values come from full-graph degrees: the one formula of
/// [`Block::adjacency`] and of a streamed chunk's cut (`Parted::part`), as the step's
/// adjacency has it.
#[derive(Clone, Copy)]
pub(super) struct EntryValues {
    pub(super) norm: AdjNorm,
    /// 1 when the flavour adds a self-loop (which counts in the degrees), else 0.
    loop_: f32,
}

impl EntryValues {
    pub(super) fn of(kind: AdjKind) -> EntryValues {
        EntryValues {
            norm: kind.norm(),
            loop_: f32::from(u8::from(kind.self_loops())),
        }
    }

    /// A node's degree in the flavour from its stored degree: the self-loop counted, at
    /// least 1.
    pub(super) fn degree(self, d: f32) -> f32 {
        (d + self.loop_).max(1.0)
    }

    /// Whether a row's values read the neighbour's degree (the column and symmetric norms);
    /// the others fill a row with one value without reading them (a random read of the
    /// offsets per entry: 7 % of a GraphSAGE evaluation).
    pub(super) fn per_entry(self) -> bool {
        matches!(self.norm, AdjNorm::Cols | AdjNorm::Sym)
    }
}

/// The row blocks of a [`FullGraph`](super::FullGraph)'s passes and the adjacencies built
/// on them, kept for the next passes when the whole graph's fit (the per-epoch evaluation
/// of a small graph: every pass copies the same rows and builds the same adjacencies,
/// which was a third of a full-batch R-GCN evaluation). Values depend on the store alone.
#[derive(Default)]
pub(super) struct BlockCache {
    blocks: HashMap<(usize, usize), Arc<Block>>,
    adjacency: HashMap<(usize, usize, AdjKey), SparseMat>,
}

impl BlockCache {
    /// Blocks kept.
    pub(super) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Rows r0..r1 of the full graph: the block kept by an earlier pass, or copied (and
    /// kept, where the caller keeps blocks).
    pub(super) fn block(
        cache: Option<&Mutex<BlockCache>>,
        store: &GraphStore,
        r0: usize,
        r1: usize,
    ) -> Result<Arc<Block>> {
        let Some(cache) = cache else {
            return Ok(Arc::new(Block::new(store, r0, r1)?));
        };
        let lock = || cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = lock().blocks.get(&(r0, r1)) {
            return Ok(Arc::clone(b));
        }
        let b = Arc::new(Block::new(store, r0, r1)?);
        lock().blocks.insert((r0, r1), Arc::clone(&b));
        Ok(b)
    }

    /// `block`'s adjacency in flavour `key`: the one kept from an earlier pass over the
    /// same rows `range`, or built (and kept, where the caller keeps blocks).
    pub(super) fn adjacency(
        cache: Option<&Mutex<BlockCache>>,
        store: &GraphStore,
        block: &Block,
        range: Option<(usize, usize)>,
        key: AdjKey,
    ) -> SparseMat {
        let (Some(cache), Some((r0, r1))) = (cache, range) else {
            return block.adjacency(store, key);
        };
        let lock = || cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = lock().adjacency.get(&(r0, r1, key)) {
            return a.clone();
        }
        let a = block.adjacency(store, key);
        lock().adjacency.insert((r0, r1, key), a.clone());
        a
    }
}
