//! GraphSAINT normalisation (ICLR 2020 §3.2; the derivation in docs/SAMPLING.md, typed
//! graphs in `typed_norm.rs`): pre-sample subgraphs and count how often
//! each node (C_v) and each edge (C_{u,v}) appears, then
//!
//! * aggregator coefficients α_{u,v} = C_{u,v} / C_v: in a subgraph, the entry of row v
//!   and column u is weighted by 1/α_{u,v} = C_v / C_{u,v};
//! * loss coefficients λ_v = |V_train| · C_v / N_pre: the loss of node v is weighted by
//!   1/λ_v = N_pre / (C_v · |V_train|).
//!
//! As in GraphSAINT, a node never sampled gets C_v = 0.1 for its loss weight, and an
//! edge never sampled counts as 1 (it can still appear in a later subgraph).
//!
//! Counts are kept in whichever of two layouts is smaller, per table ([`Counts`]): dense
//! (one u32 per node or CSR entry of the sampled graph) or sparse (sorted (key, count)
//! arrays of what was drawn, memory ∝ the pre-sampled draws). The choice is made from
//! subgraph 0's size × N_pre against the graph's: a graph of 2^25 nodes and 2·10^8 entries
//! pre-sampled by 200 frontier subgraphs keeps ~1.5·10^6 nodes and ~7·10^6 entries
//! (sparse, ~100 MB instead of ~900 MB), while a small dense graph whose entries are
//! nearly all drawn keeps 4 bytes per entry (sparse would cost 12 per drawn entry). Dense
//! counts are accumulated with relaxed atomic adds; sparse ones, each subgraph's nodes and
//! parent entries coming out of the induction sorted and distinct, by a tree of merges.
//! Sums do not depend on the order, so either is deterministic for a seed, and both give
//! the same counts ([`Layout`] forces one). A subgraph's lookups are in ascending key order
//! (nodes ascending, entries ascending row by row), so sparse lookups go through a
//! galloping cursor: O(log gap) each.
//!
//! File format (atomic write): magic `SFNORM01`, u32 version (2), u32 meta length, JSON
//! meta (sampler, graph, counts), then the node table and the entry table, each a u8
//! layout — 0: dense, u32 × n (N or nnz); 1: sparse, u64 K, K keys (u32 nodes, u64
//! entries), u32 × K counts — then the xxh3-64 of everything before it. Sparse keys are
//! strictly ascending and in range, sparse counts in 1..=N_pre, dense counts ≤ N_pre
//! (checked on load).

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::sample::{sample_subgraph, SampleError, Sampler, Subgraph};
use crate::store::StoreError;

const MAGIC: &[u8; 8] = b"SFNORM01";
const VERSION: u32 = 2;

/// Descriptive fields of a normalisation file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormMeta {
    /// The sampler's name with its parameters.
    pub sampler: String,
    /// Pre-sampled subgraphs N_pre.
    pub subgraphs: u64,
    /// Seed of the pre-sampling.
    pub seed: u64,
    /// Nodes of the sampled graph.
    pub n_nodes: u64,
    /// Entries of the sampled graph.
    pub n_entries: u64,
}

/// Counts of the keys that occurred: `keys` strictly ascending, `counts[i] ≥ 1` that of
/// `keys[i]`; an absent key counts 0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SparseCounts<K> {
    keys: Vec<K>,
    counts: Vec<u32>,
}

impl<K: Copy + Ord> SparseCounts<K> {
    /// Each key of a strictly ascending list, counted once.
    fn once(keys: Vec<K>) -> Self {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let counts = vec![1; keys.len()];
        SparseCounts { keys, counts }
    }

    /// The sum of two count sets (a merge of the sorted keys).
    fn merge(a: Self, b: Self) -> Self {
        if a.keys.is_empty() {
            return b;
        }
        if b.keys.is_empty() {
            return a;
        }
        let cap = a.keys.len() + b.keys.len();
        let (mut keys, mut counts) = (Vec::with_capacity(cap), Vec::with_capacity(cap));
        let (mut i, mut j) = (0, 0);
        while i < a.keys.len() && j < b.keys.len() {
            let (ka, kb) = (a.keys[i], b.keys[j]);
            if ka <= kb {
                keys.push(ka);
                counts.push(a.counts[i] + if ka == kb { b.counts[j] } else { 0 });
                j += usize::from(ka == kb);
                i += 1;
            } else {
                keys.push(kb);
                counts.push(b.counts[j]);
                j += 1;
            }
        }
        keys.extend_from_slice(&a.keys[i..]);
        counts.extend_from_slice(&a.counts[i..]);
        keys.extend_from_slice(&b.keys[j..]);
        counts.extend_from_slice(&b.counts[j..]);
        SparseCounts { keys, counts }
    }

    /// Distinct keys counted.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The count of `key` (0 when absent), by binary search.
    pub fn get(&self, key: K) -> u32 {
        self.keys.binary_search(&key).map_or(0, |i| self.counts[i])
    }

    /// `(key, count)` in ascending key order.
    pub fn iter(&self) -> impl Iterator<Item = (K, u32)> + '_ {
        self.keys.iter().copied().zip(self.counts.iter().copied())
    }

    /// The sum of the counts.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    /// A cursor for lookups in (mostly) ascending key order.
    fn cursor(&self) -> Cursor<'_, K> {
        Cursor { c: self, pos: 0 }
    }
}

/// Lookups that gallop forward from the previous one's position (a lookup below it starts
/// over from the front). Invariant: every key before `pos` is below the last query.
struct Cursor<'a, K> {
    c: &'a SparseCounts<K>,
    pos: usize,
}

impl<K: Copy + Ord> Cursor<'_, K> {
    fn get(&mut self, key: K) -> u32 {
        let keys = &self.c.keys;
        if self.pos > 0 && keys[self.pos - 1] >= key {
            self.pos = 0;
        }
        let mut step = 1;
        while self.pos + step <= keys.len() && keys[self.pos + step - 1] < key {
            step *= 2;
        }
        let lo = self.pos + step / 2;
        let hi = (self.pos + step).min(keys.len());
        self.pos = lo + keys[lo..hi].partition_point(|&k| k < key);
        match keys.get(self.pos) {
            Some(&k) if k == key => self.c.counts[self.pos],
            _ => 0,
        }
    }
}

/// `v` sorted and distinct: induction gives both lists so; anything else is made so.
fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    if !v.is_sorted() {
        v.sort_unstable();
        v.dedup();
    }
    v
}

/// One table of counts in either layout (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counts<K> {
    /// One count per key 0..n.
    Dense(Vec<u32>),
    /// The keys drawn only.
    Sparse(SparseCounts<K>),
}

impl<K: Copy + Ord + Into<u64>> Counts<K> {
    /// The count of `key` (0 when never drawn).
    pub fn get(&self, key: K) -> u32 {
        match self {
            Counts::Dense(v) => v.get(key.into() as usize).copied().unwrap_or(0),
            Counts::Sparse(s) => s.get(key),
        }
    }

    /// The sum of the counts.
    pub fn total(&self) -> u64 {
        match self {
            Counts::Dense(v) => v.iter().map(|&c| u64::from(c)).sum(),
            Counts::Sparse(s) => s.total(),
        }
    }

    /// Keys with a count above 0.
    pub fn distinct(&self) -> usize {
        match self {
            Counts::Dense(v) => v.iter().filter(|&&c| c > 0).count(),
            Counts::Sparse(s) => s.len(),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match self {
            Counts::Dense(v) => 4 * v.len(),
            Counts::Sparse(s) => (std::mem::size_of::<K>() + 4) * s.len(),
        }
    }

    fn lookup(&self) -> Lookup<'_, K> {
        match self {
            Counts::Dense(v) => Lookup::Dense(v),
            Counts::Sparse(s) => Lookup::Sparse(s.cursor()),
        }
    }
}

enum Lookup<'a, K> {
    Dense(&'a [u32]),
    Sparse(Cursor<'a, K>),
}

impl<K: Copy + Ord + Into<u64>> Lookup<'_, K> {
    #[inline]
    fn get(&mut self, key: K) -> u32 {
        match self {
            Lookup::Dense(v) => v.get(key.into() as usize).copied().unwrap_or(0),
            Lookup::Sparse(c) => c.get(key),
        }
    }
}

/// Which layout [`NormCounts::estimate_with`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Per table, the smaller for the expected draws (what `estimate` does).
    Auto,
    /// Both tables dense.
    Dense,
    /// Both tables sparse.
    Sparse,
}

/// Node and edge appearance counts over N_pre pre-sampled subgraphs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormCounts {
    /// What was counted.
    pub meta: NormMeta,
    /// C_v per node of the sampled graph.
    pub node: Counts<u32>,
    /// C_{u,v} per entry (position in the sampled graph's CSR).
    pub edge: Counts<u64>,
}

impl NormCounts {
    /// Pre-samples `subgraphs` subgraphs (indices 0.., in parallel) and counts, each
    /// table in the smaller layout.
    pub fn estimate(
        sampler: &(impl Sampler + ?Sized),
        subgraphs: u64,
        seed: u64,
        clip_to: usize,
    ) -> Result<Self, SampleError> {
        Self::estimate_with(sampler, subgraphs, seed, clip_to, Layout::Auto)
    }

    /// [`NormCounts::estimate`] with the layout chosen by the caller.
    pub fn estimate_with(
        sampler: &(impl Sampler + ?Sized),
        subgraphs: u64,
        seed: u64,
        clip_to: usize,
        layout: Layout,
    ) -> Result<Self, SampleError> {
        let g = sampler.graph();
        let (n, nnz) = (g.n_nodes() as u64, g.n_entries() as u64);
        let (dense_nodes, dense_edges) = match layout {
            Layout::Dense => (true, true),
            Layout::Sparse => (false, false),
            Layout::Auto if subgraphs == 0 => (false, false),
            Layout::Auto => {
                // Sparse costs 8 (nodes) or 12 (entries) bytes per distinct key drawn,
                // dense 4 per key of the graph; draws estimated from subgraph 0.
                let s0 = sample_subgraph(sampler, seed, 0, clip_to)?;
                let nodes = subgraphs.saturating_mul(s0.n_nodes() as u64);
                let entries = subgraphs.saturating_mul(s0.n_entries() as u64);
                (2 * nodes.min(n) >= n, 3 * entries.min(nnz) >= nnz)
            }
        };
        let atomics = |on: bool, len: u64| -> Option<Vec<AtomicU32>> {
            on.then(|| (0..len).map(|_| AtomicU32::new(0)).collect())
        };
        let (node_acc, edge_acc) = (atomics(dense_nodes, n), atomics(dense_edges, nnz));
        let (node, edge) = (0..subgraphs)
            .into_par_iter()
            .map(|i| -> Result<_, SampleError> {
                let s = sample_subgraph(sampler, seed, i, clip_to)?;
                let node = match &node_acc {
                    Some(acc) => {
                        for &v in &s.nodes {
                            acc[v as usize].fetch_add(1, Ordering::Relaxed);
                        }
                        SparseCounts::default()
                    }
                    None => SparseCounts::once(sorted(s.nodes)),
                };
                let edge = match &edge_acc {
                    Some(acc) => {
                        for &p in &s.parent_entries {
                            acc[p as usize].fetch_add(1, Ordering::Relaxed);
                        }
                        SparseCounts::default()
                    }
                    None => SparseCounts::once(sorted(s.parent_entries)),
                };
                Ok((node, edge))
            })
            .try_reduce(
                || (SparseCounts::default(), SparseCounts::default()),
                |a, b| Ok((SparseCounts::merge(a.0, b.0), SparseCounts::merge(a.1, b.1))),
            )?;
        let finish = |acc: Option<Vec<AtomicU32>>| {
            acc.map(|a| {
                a.into_iter()
                    .map(AtomicU32::into_inner)
                    .collect::<Vec<u32>>()
            })
        };
        Ok(NormCounts {
            meta: NormMeta {
                sampler: sampler.name(),
                subgraphs,
                seed,
                n_nodes: n,
                n_entries: nnz,
            },
            node: finish(node_acc).map_or(Counts::Sparse(node), Counts::Dense),
            edge: finish(edge_acc).map_or(Counts::Sparse(edge), Counts::Dense),
        })
    }

    /// C_v of node `v`.
    pub fn node_count(&self, v: u32) -> u32 {
        self.node.get(v)
    }

    /// C_{u,v} of the entry at position `entry` of the sampled graph's CSR.
    pub fn edge_count(&self, entry: u64) -> u32 {
        self.edge.get(entry)
    }

    /// Σ_v C_v: the nodes drawn over all pre-sampled subgraphs.
    pub fn nodes_drawn(&self) -> u64 {
        self.node.total()
    }

    /// Per-entry aggregator weights 1/α of a subgraph drawn from the same graph: entry
    /// (row v, column u) gets C_v / C_{u,v}.
    pub fn aggregator_weights(&self, s: &Subgraph) -> Vec<f32> {
        let mut w = Vec::with_capacity(s.n_entries());
        let (mut nodes, mut edges) = (self.node.lookup(), self.edge.lookup());
        for i in 0..s.n_nodes() {
            let cv = f64::from(nodes.get(s.nodes[i]).max(1));
            for k in s.offsets[i]..s.offsets[i + 1] {
                let cuv = f64::from(edges.get(s.parent_entries[k as usize]).max(1));
                w.push((cv / cuv) as f32);
            }
        }
        w
    }

    /// Weight 1/C_v of each subgraph node (C_v = 0 read as 0.1, as for the loss): ∝ 1/P(v
    /// in a subgraph), what statistics over a subgraph's nodes weigh node v by to estimate
    /// the sampled graph's (`batchnorm`).
    pub fn node_weights(&self, s: &Subgraph) -> Vec<f32> {
        let mut nodes = self.node.lookup();
        s.nodes
            .iter()
            .map(|&v| match nodes.get(v) {
                0 => 10.0,
                c => (1.0 / f64::from(c)) as f32,
            })
            .collect()
    }

    /// Loss weight 1/λ_v = N_pre / (C_v · n_train) of each subgraph node.
    pub fn loss_weights(&self, s: &Subgraph, n_train: usize) -> Vec<f32> {
        let n_pre = self.meta.subgraphs as f64;
        let mut nodes = self.node.lookup();
        s.nodes
            .iter()
            .map(|&v| {
                let c = match nodes.get(v) {
                    0 => 0.1,
                    c => f64::from(c),
                };
                (n_pre / (c * n_train.max(1) as f64)) as f32
            })
            .collect()
    }

    /// PyTorch Geometric's `GraphSAINTSampler` normalisation of a subgraph, so a PyG model
    /// runs on saintflow's batches unchanged (the Python package's `SaintSampler`):
    /// `node_norm[i]` = N_pre / (C_v · N) with N_pre the pre-sampled subgraphs (PyG's
    /// `num_samples`, which counts subgraphs: `num_steps` per pass), C_v = 0 read as 0.1, N
    /// the sampled graph's nodes; `edge_norm[k]` = C_row / C_{row,col} of entry k = (row, col) of the
    /// subgraph's CSR, in f32 as PyG computes it, clamped to [0, 10⁴], 0.1 where both
    /// counts are 0. PyG's `edge_index` is that CSR's (row, col), its messages flow row →
    /// col, so the weight on the message into `col` carries the *sender's* count; the
    /// paper's α_{u,v} (and [`NormCounts::aggregator_weights`]) divide by the receiver's
    /// (docs/PYTHON.md says how to get it from a PyG model).
    pub fn pyg_norms(&self, s: &Subgraph) -> (Vec<f32>, Vec<f32>) {
        let (mut node_norm, mut edge_norm) = (Vec::new(), Vec::new());
        self.pyg_norms_into(s, &mut node_norm, &mut edge_norm);
        (node_norm, edge_norm)
    }

    /// [`NormCounts::pyg_norms`] into buffers the caller reuses (their contents replaced).
    pub fn pyg_norms_into(&self, s: &Subgraph, node_norm: &mut Vec<f32>, edge_norm: &mut Vec<f32>) {
        let (mut nodes, mut edges) = (self.node.lookup(), self.edge.lookup());
        let (n_pre, n) = (self.meta.subgraphs as f64, self.meta.n_nodes as f64);
        node_norm.clear();
        edge_norm.clear();
        edge_norm.reserve(s.n_entries());
        for (i, &v) in s.nodes.iter().enumerate() {
            let c_row = nodes.get(v);
            let c = if c_row == 0 { 0.1 } else { f64::from(c_row) };
            node_norm.push((n_pre / c / n) as f32);
            for k in s.offsets[i]..s.offsets[i + 1] {
                let c_uv = edges.get(s.parent_entries[k as usize]);
                edge_norm.push(match (c_row, c_uv) {
                    (0, 0) => 0.1,
                    (c, e) => (c as f32 / e as f32).clamp(0.0, 1e4),
                });
            }
        }
    }

    /// Writes the counts to `path` atomically ([`crate::atomic`]).
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let meta = serde_json::to_vec(&self.meta).expect("meta serialises");
        let mut bytes =
            Vec::with_capacity(16 + meta.len() + 18 + self.node.bytes() + self.edge.bytes() + 8);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&meta);
        write_counts(&mut bytes, &self.node);
        write_counts(&mut bytes, &self.edge);
        let sum = xxhash_rust::xxh3::xxh3_64(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        crate::atomic::write_atomic(path, &bytes).map_err(|e| StoreError::io(path, "write", e))
    }

    /// Reads counts written by [`NormCounts::save`], verifying magic, version, lengths,
    /// checksum, key order and range, and count range.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, "read", e))?;
        let bad = |what: String| StoreError::corrupt(path, "normalisation", what);
        if bytes.len() < 24 || &bytes[..8] != MAGIC {
            return Err(bad(
                "not a saintflow normalisation file (wrong magic or too short)".into(),
            ));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let want = u64::from_le_bytes(sum.try_into().unwrap());
        let got = xxhash_rust::xxh3::xxh3_64(body);
        if want != got {
            return Err(bad(format!(
                "checksum mismatch, expected {want:016x}, got {got:016x}"
            )));
        }
        let version = u32::from_le_bytes(body[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(bad(format!(
                "unsupported version, expected {VERSION}, got {version} (re-run `saintflow sample --save-norm`)"
            )));
        }
        let meta_len = u32::from_le_bytes(body[12..16].try_into().unwrap()) as usize;
        let meta_end = 16usize
            .checked_add(meta_len)
            .filter(|&e| e <= body.len())
            .ok_or_else(|| bad("meta length past the end".into()))?;
        let meta: NormMeta =
            serde_json::from_slice(&body[16..meta_end]).map_err(|e| bad(format!("meta: {e}")))?;
        let mut rest = &body[meta_end..];
        let node: Counts<u32> =
            read_counts(&mut rest, "nodes", meta.n_nodes, &meta).map_err(bad)?;
        let edge: Counts<u64> =
            read_counts(&mut rest, "entries", meta.n_entries, &meta).map_err(bad)?;
        if !rest.is_empty() {
            return Err(bad(format!("{} bytes past the entry counts", rest.len())));
        }
        Ok(NormCounts { meta, node, edge })
    }
}

fn write_counts<K: bytemuck::Pod>(bytes: &mut Vec<u8>, c: &Counts<K>) {
    match c {
        Counts::Dense(v) => {
            bytes.push(0);
            bytes.extend_from_slice(bytemuck::cast_slice(v));
        }
        Counts::Sparse(s) => {
            bytes.push(1);
            bytes.extend_from_slice(&(s.keys.len() as u64).to_le_bytes());
            bytes.extend_from_slice(bytemuck::cast_slice(&s.keys));
            bytes.extend_from_slice(bytemuck::cast_slice(&s.counts));
        }
    }
}

/// Reads one table off the front of `rest`: a layout byte, then `n` u32 counts (dense) or
/// `u64 K, K keys, K u32 counts` (sparse), checking sparse keys strictly ascending and
/// below `n`, counts ≤ N_pre (and ≥ 1 when sparse).
fn read_counts<K>(
    rest: &mut &[u8],
    what: &str,
    n: u64,
    meta: &NormMeta,
) -> Result<Counts<K>, String>
where
    K: bytemuck::Pod + Ord + Into<u64>,
{
    let short = || format!("{what}: truncated");
    let (&layout, tail) = rest.split_first().ok_or_else(short)?;
    *rest = tail;
    match layout {
        0 => {
            let len = n
                .checked_mul(4)
                .filter(|&l| l <= rest.len() as u64)
                .ok_or_else(short)? as usize;
            let counts: Vec<u32> = bytemuck::pod_collect_to_vec(&rest[..len]);
            *rest = &rest[len..];
            if let Some(c) = counts.iter().find(|&&c| u64::from(c) > meta.subgraphs) {
                return Err(format!(
                    "{what}: count {c} out of range, expected ≤ {}",
                    meta.subgraphs
                ));
            }
            Ok(Counts::Dense(counts))
        }
        1 => read_sparse(rest, what, n, meta).map(Counts::Sparse),
        b => Err(format!("{what}: layout byte expected 0 or 1, got {b}")),
    }
}

fn read_sparse<K>(
    rest: &mut &[u8],
    what: &str,
    n: u64,
    meta: &NormMeta,
) -> Result<SparseCounts<K>, String>
where
    K: bytemuck::Pod + Ord + Into<u64>,
{
    let short = || format!("{what}: truncated");
    if rest.len() < 8 {
        return Err(short());
    }
    let k = u64::from_le_bytes(rest[..8].try_into().unwrap());
    let width = std::mem::size_of::<K>() as u64 + 4;
    let len = k
        .checked_mul(width)
        .filter(|&l| l <= (rest.len() - 8) as u64)
        .ok_or_else(short)? as usize;
    let k = k as usize;
    let key_bytes = k * std::mem::size_of::<K>();
    let keys: Vec<K> = bytemuck::pod_collect_to_vec(&rest[8..8 + key_bytes]);
    let counts: Vec<u32> = bytemuck::pod_collect_to_vec(&rest[8 + key_bytes..8 + len]);
    *rest = &rest[8 + len..];
    if let Some(i) = (1..k).find(|&i| keys[i - 1] >= keys[i]) {
        return Err(format!("{what}: keys not strictly ascending at {i}"));
    }
    if let Some(&last) = keys.last() {
        if last.into() >= n {
            return Err(format!(
                "{what}: key {} out of range, expected < {n}",
                last.into()
            ));
        }
    }
    if let Some(c) = counts
        .iter()
        .find(|&&c| c == 0 || u64::from(c) > meta.subgraphs)
    {
        return Err(format!(
            "{what}: count {c} out of range, expected 1..={}",
            meta.subgraphs
        ));
    }
    Ok(SparseCounts { keys, counts })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyG's `_compute_norm` by hand on a path 0 – 1 – 2 – 3 whose node 3 and entries
    /// (2,3), (3,2) were never drawn in the pre-sampling.
    #[test]
    fn pyg_norms_follow_pygs_compute_norm() {
        // Entries of the path's CSR: 0:(0,1) 1:(1,0) 2:(1,2) 3:(2,1) 4:(2,3) 5:(3,2).
        let node = vec![4u32, 6, 2, 0];
        let counts = NormCounts {
            meta: NormMeta {
                sampler: "hand".into(),
                subgraphs: 5,
                seed: 0,
                n_nodes: 4,
                n_entries: 6,
            },
            node: Counts::Dense(node),
            edge: Counts::Sparse(SparseCounts {
                keys: vec![0, 1, 2, 3],
                counts: vec![3, 3, 1, 2],
            }),
        };
        assert_eq!(counts.edge_count(4), 0);
        // The whole path as the subgraph (local ids = global ids).
        let s = Subgraph {
            nodes: vec![0, 1, 2, 3],
            offsets: vec![0, 1, 3, 5, 6],
            indices: vec![1, 0, 2, 1, 3, 2],
            parent_entries: vec![0, 1, 2, 3, 4, 5],
            link: None,
            typed: None,
        };
        let (node_norm, edge_norm) = counts.pyg_norms(&s);
        // num_samples = the 5 pre-sampled subgraphs (not the 12 nodes they drew);
        // node_norm = 5 / C_v / N, C_v = 0 read as 0.1.
        let want: Vec<f32> = [4.0, 6.0, 2.0, 0.1]
            .iter()
            .map(|c: &f64| (5.0 / c / 4.0) as f32)
            .collect();
        assert_eq!(node_norm, want);
        // edge_norm = C_row / C_e: 4/3, 6/3, 6/1, 2/2; C_e = 0 with C_row = 2 → inf →
        // clamped to 10⁴; both 0 → NaN → 0.1.
        assert_eq!(edge_norm, vec![4.0 / 3.0, 2.0, 6.0, 1.0, 1e4, 0.1f32]);
    }
}
