//! What everything past the first level reads of a graph: [`Adjacency`], N and each node's
//! neighbours as a slice (no self loop, every id < N), with unit edge weights. Two sources:
//! [`WGraph`], the multilevel partitioner's graph in RAM (memory ∝ N + nnz), and
//! [`StoreGraph`], the store's own CSR read in place from its mapped pages, so that the
//! streaming partitioner, GAD augmentation and the part-store writer hold only O(N)
//! anonymous memory (the pages are the kernel's, reclaimable under a memory cap).

use rayon::prelude::*;

use super::multilevel::WGraph;
use super::PartitionError;
use crate::store::mmap::Csr;
use crate::store::GraphStore;

/// A symmetric graph without self loops, read row by row (see the module's documentation).
pub trait Adjacency: Sync {
    /// N.
    fn n(&self) -> usize;
    /// The neighbours of `u` (< N, never `u`). Panics if `u ≥ N` (a caller bug).
    fn row(&self, u: usize) -> &[u32];
    /// Directed entries Σ deg: twice the undirected edges.
    fn entries(&self) -> u64;
}

impl Adjacency for WGraph {
    fn n(&self) -> usize {
        WGraph::n(self)
    }

    fn row(&self, u: usize) -> &[u32] {
        &self.adj[self.xadj[u]..self.xadj[u + 1]]
    }

    fn entries(&self) -> u64 {
        self.adj.len() as u64
    }
}

/// A store's full graph as an [`Adjacency`] over its mapped CSR: nothing copied.
#[derive(Clone, Copy)]
pub struct StoreGraph<'a> {
    csr: Csr<'a>,
}

/// Rows a worker checks at a time in [`StoreGraph::new`]'s pass.
const CHECK_ROWS: usize = 1 << 14;

impl<'a> StoreGraph<'a> {
    /// The full graph of `store`, after one parallel pass over its rows checking that every
    /// neighbour id is < N and no row holds its own node (a store `check` passes has
    /// neither; the readers index arrays by neighbour id). Errors name the first bad row.
    pub fn new(store: &'a GraphStore) -> Result<Self, PartitionError> {
        let csr = store.full();
        let n = csr.n_nodes();
        let bad = (0..n.div_ceil(CHECK_ROWS))
            .into_par_iter()
            .find_map_first(|c| {
                (c * CHECK_ROWS..n.min((c + 1) * CHECK_ROWS)).find_map(|u| {
                    csr.neighbors(u as u32)
                        .iter()
                        .find(|&&v| v as usize >= n || v as usize == u)
                        .map(|&v| (u, v))
                })
            });
        if let Some((u, v)) = bad {
            let what = if v as usize == u {
                format!("node {u} lists itself (a self loop; a checked store has none)")
            } else {
                format!("neighbour {v} of node {u} out of range, expected < {n}")
            };
            return Err(PartitionError::argument(format!(
                "{}: {what}; run `saintflow check` on it",
                store.path().display()
            )));
        }
        Ok(StoreGraph { csr })
    }
}

impl Adjacency for StoreGraph<'_> {
    fn n(&self) -> usize {
        self.csr.n_nodes()
    }

    fn row(&self, u: usize) -> &[u32] {
        self.csr.neighbors(u as u32)
    }

    fn entries(&self) -> u64 {
        self.csr.n_entries() as u64
    }
}

/// Undirected edges with ends in different parts of `part` (unit weights), counted in
/// parallel over rows: an integer sum, the same whatever the thread count.
pub fn cut<G: Adjacency + ?Sized>(g: &G, part: &[u32]) -> u64 {
    let twice: u64 = (0..g.n())
        .into_par_iter()
        .with_min_len(CHECK_ROWS)
        .map(|u| {
            let pu = part[u];
            g.row(u).iter().filter(|&&v| part[v as usize] != pu).count() as u64
        })
        .sum();
    twice / 2
}

/// Nodes of each of the `k` parts of `part`.
pub fn part_sizes(part: &[u32], k: usize) -> Vec<u64> {
    let mut sizes = vec![0u64; k];
    for &p in part {
        sizes[p as usize] += 1;
    }
    sizes
}

/// The largest part over the mean, N/k: 1.0 is perfect balance (1.0 for N = 0).
pub fn balance(part: &[u32], k: usize) -> f64 {
    if part.is_empty() {
        return 1.0;
    }
    let max = part_sizes(part, k).into_iter().max().unwrap_or(0);
    max as f64 * k as f64 / part.len() as f64
}
