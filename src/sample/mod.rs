//! Graph samplers: the first stage of every training step. A [`Sampler`] draws a node
//! multiset from a graph; [`sample_subgraph`] turns it into an induced [`Subgraph`]
//! (dedup, optional clipping, induction); [`sample_pool`] fills a pool of subgraphs with
//! independent samplers in parallel (inter-sampler parallelism). Each sampler's file
//! declares its typed parameters ([`params`]); [`SamplerConfig`] gathers them.
//!
//! Determinism: subgraph `i` of a run with seed `s` is drawn from an RNG seeded by
//! hash(s, i) alone, so it is the same whatever the number of threads or the order in
//! which subgraphs are drawn.

// First, so that `sampler_params!` is in scope in the sampler files below.
#[macro_use]
pub mod params;

pub mod alias;
pub mod config;
pub mod edge;
pub mod frontier;
pub mod induce;
pub mod link;
pub mod naive;
pub mod node;
pub mod norm;
pub mod typed;
pub mod typed_norm;
pub mod typed_params;
pub mod walk;

use rand::SeedableRng;
use rand_core::RngCore;
use rayon::prelude::*;

use crate::seed::{hash3, stream};
use crate::store::Csr;
use crate::store::StoreError;

pub use config::{SamplerConfig, KINDS};
pub use edge::{EdgeParams, EdgeSampler};
pub use frontier::{Dashboard, FrontierParams, FrontierSampler};
pub use induce::{
    clip, induce, induce_into, sort_dedup, subgraph_offset, transpose_between,
    transpose_permutation, Subgraph,
};
pub use link::{
    attach_targets, saint_target_weight, LinkBatch, LinkSampling, NegativeDist, NegativeEnds,
};
pub use node::{FullParams, FullSampler, NodeParams, NodeSampler};
pub use norm::{Counts, Layout, NormCounts, SparseCounts};
pub use params::SamplerParams;
pub use typed::{
    attach_relations, sample_typed_pool, sample_typed_subgraph, typed_walk_sampler, SubRelation,
    SubgraphTypes, TypedEdgeSampler, TypedNodeSampler, WalkRoots,
};
pub use typed_norm::TypedNormCounts;
pub use typed_params::{TypedEdgeParams, TypedNodeParams, TypedWalkParams};
pub use walk::{RandomWalkSampler, WalkParams};

/// The RNG of one subgraph draw: xoshiro256++, a fixed algorithm (portable results).
pub type SampleRng = rand_xoshiro::Xoshiro256PlusPlus;

/// Errors of the sampling layer.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// Reading the graph failed (corrupt store: a neighbour id out of range).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sampler parameter is out of range.
    #[error("sampler parameter: {0}")]
    Param(String),
    /// The graph has no edges, so there is nothing to sample from.
    #[error("the graph has no edges: nothing to sample (for inductive training, is the training graph empty?)")]
    NoEdges,
}

/// A graph sampler: draws a node multiset from its graph. Implement it to plug in a sampler
/// of your own; [`sample_subgraph`] does the rest (dedup, clip, induce).
pub trait Sampler: Sync {
    /// A description with the parameters, e.g. `frontier(m=1000, n=8000, eta=2)`.
    fn name(&self) -> String;
    /// The graph sampled from.
    fn graph(&self) -> Csr<'_>;
    /// Appends the sampled nodes (any order, repeats allowed) to `out`.
    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError>;
    /// Whether every subgraph is the whole graph, the same at every index (a source may
    /// build it once and hand out copies). Default: no.
    fn whole_graph(&self) -> bool {
        false
    }
}

/// A uniform integer in `0..k` (k ≥ 1) by Lemire's multiply-shift; bias ≤ k / 2^64.
#[inline]
pub fn below(rng: &mut impl RngCore, k: u64) -> u64 {
    scale(rng.next_u64(), k)
}

/// The integer in `0..k` that [`below`] makes of the random number `x`.
#[inline]
pub fn scale(x: u64, k: u64) -> u64 {
    ((u128::from(x) * u128::from(k)) >> 64) as u64
}

/// A uniformly random neighbour of `u` (which must have one), checked `< N`: O(1), so a
/// corrupt store is an error without scanning the row.
#[inline]
pub fn random_neighbor(graph: Csr<'_>, u: u32, rng: &mut impl RngCore) -> Result<u32, SampleError> {
    Ok(neighbor_at(graph, u, rng.next_u64())?.expect("the caller's node has a neighbour"))
}

/// The neighbour of `u` that the random number `x` picks ([`scale`]d to the row), checked
/// `< N`; None when `u` has none.
#[inline]
pub fn neighbor_at(graph: Csr<'_>, u: u32, x: u64) -> Result<Option<u32>, SampleError> {
    let row = graph.try_neighbors(u)?;
    if row.is_empty() {
        return Ok(None);
    }
    let v = row[scale(x, row.len() as u64) as usize];
    if v as usize >= graph.n_nodes() {
        return Err(StoreError::neighbor_out_of_range(u, v, graph.n_nodes() as u64).into());
    }
    Ok(Some(v))
}

/// Nodes with at least one neighbour, ascending (parallel scan of the offsets).
pub fn nodes_with_edges(graph: Csr<'_>) -> Vec<u32> {
    let offsets = graph.offsets();
    (0..graph.n_nodes() as u32)
        .into_par_iter()
        .filter(|&v| offsets[v as usize + 1] > offsets[v as usize])
        .collect()
}

/// A node list a sampler draws from by index (uniformly: an index below `count`).
pub trait NodeList: Sync {
    /// How many nodes.
    fn count(&self) -> usize;
    /// The `i`-th, `i < count()`.
    fn at(&self, i: usize) -> u32;
}

impl NodeList for EdgeNodes {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn at(&self, i: usize) -> u32 {
        self.get(i)
    }
}

impl NodeList for Vec<u32> {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn at(&self, i: usize) -> u32 {
        self[i]
    }
}

/// Words per block of the rank directory of [`EdgeNodes`].
const SELECT_BLOCK: usize = 8;

/// Nodes per entry of the select hints of [`EdgeNodes`].
const SELECT_HINT: usize = 512;

/// The nodes with at least one neighbour, ascending, without listing them: a bitmap (bit v
/// set when v has a neighbour), the count of such nodes before each block of 8 words, and
/// for every 512th node the block that holds it. `get(i)` is the i-th of them — what
/// `nodes_with_edges(g)[i]` is — found by a binary search over the blocks between two
/// hints (one or two blocks where most nodes have neighbours), a scan of at most 8 words
/// and a select within the word by halving. N/8 + N/64 + N/128 bytes at most, against 4
/// bytes per listed node (128 MiB at 2^25 nodes): what the samplers draw their roots from.
/// A search over all the blocks and a bit-by-bit select took 39 ns per root on a
/// Kronecker scale-17 graph (15 % of the random-walk sampler's time, BENCHMARKS.md).
#[derive(Debug, Clone)]
pub struct EdgeNodes {
    bits: Vec<u64>,
    /// Set bits in the words before block b (b = word / 8).
    before: Vec<u64>,
    /// `hints[j]`: the block holding node j·512 of the list (the last block b with
    /// before[b] ≤ j·512).
    hints: Vec<u32>,
    len: usize,
}

impl EdgeNodes {
    /// Scans the offsets once (in parallel).
    pub fn new(graph: Csr<'_>) -> EdgeNodes {
        let offsets = graph.offsets();
        let n = graph.n_nodes();
        let bits: Vec<u64> = (0..n.div_ceil(64))
            .into_par_iter()
            .map(|w| {
                let lo = w * 64;
                let hi = (lo + 64).min(n);
                (lo..hi).fold(0u64, |acc, v| {
                    acc | (u64::from(offsets[v + 1] > offsets[v]) << (v - lo))
                })
            })
            .collect();
        let mut before = Vec::with_capacity(bits.len().div_ceil(SELECT_BLOCK));
        let mut total = 0u64;
        for block in bits.chunks(SELECT_BLOCK) {
            before.push(total);
            total += block.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        }
        let hints = (0..(total as usize).div_ceil(SELECT_HINT))
            .map(|j| (before.partition_point(|&r| r <= (j * SELECT_HINT) as u64) - 1) as u32)
            .collect();
        EdgeNodes {
            bits,
            before,
            hints,
            len: total as usize,
        }
    }

    /// How many nodes have a neighbour.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no node has one.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th node with a neighbour (ascending), `i < len()`.
    pub fn get(&self, i: usize) -> u32 {
        debug_assert!(i < self.len);
        let j = i / SELECT_HINT;
        let lo = self.hints[j] as usize;
        let hi = self
            .hints
            .get(j + 1)
            .map_or(self.before.len(), |&h| h as usize + 1);
        let i = i as u64;
        let b = lo + self.before[lo..hi].partition_point(|&r| r <= i) - 1;
        let mut left = i - self.before[b];
        for (k, &w) in self.bits[b * SELECT_BLOCK..].iter().enumerate() {
            let c = u64::from(w.count_ones());
            if left < c {
                return ((b * SELECT_BLOCK + k) * 64) as u32 + select_in_word(w, left as u32);
            }
            left -= c;
        }
        unreachable!("index below len() has a set bit")
    }

    /// The nodes in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(k, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let t = w.trailing_zeros();
                    w &= w - 1;
                    (k * 64) as u32 + t
                })
            })
        })
    }
}

/// The position of the `r`-th set bit of `w` (r < popcount(w)), by halving: which half
/// holds it, from the lower half's count, six times.
#[inline]
fn select_in_word(w: u64, r: u32) -> u32 {
    let (mut w, mut r, mut pos) = (w, r, 0u32);
    for half in [32u32, 16, 8, 4, 2, 1] {
        let low = (w & ((1u64 << half) - 1)).count_ones();
        let up = u32::from(r >= low);
        r -= up * low;
        pos += up * half;
        w >>= up * half;
    }
    pos
}

/// The RNG of subgraph `index` of a run seeded with `seed`.
pub fn subgraph_rng(seed: u64, index: u64) -> SampleRng {
    SampleRng::seed_from_u64(hash3(seed, stream::SUBGRAPH, index))
}

/// Draws subgraph `index`: sample nodes, dedup, drop random nodes down to a multiple of
/// `clip_to` (1 = no clipping), induce.
pub fn sample_subgraph(
    sampler: &(impl Sampler + ?Sized),
    seed: u64,
    index: u64,
    clip_to: usize,
) -> Result<Subgraph, SampleError> {
    let mut sub = Subgraph::default();
    sample_subgraph_into(sampler, seed, index, clip_to, &mut sub)?;
    Ok(sub)
}

/// [`sample_subgraph`] into `sub`, reusing its vectors' room ([`induce_into`]).
pub fn sample_subgraph_into(
    sampler: &(impl Sampler + ?Sized),
    seed: u64,
    index: u64,
    clip_to: usize,
    sub: &mut Subgraph,
) -> Result<(), SampleError> {
    let mut rng = subgraph_rng(seed, index);
    sub.typed = None;
    let nodes = &mut sub.nodes;
    nodes.clear();
    sampler.sample_nodes(&mut rng, nodes)?;
    sort_dedup(nodes, sampler.graph().n_nodes());
    clip(nodes, clip_to, &mut rng);
    Ok(induce_into(sampler.graph(), sub)?)
}

/// Draws subgraphs `first..first + count` in parallel on the current rayon pool, in index
/// order: a subgraph pool filled by independent samplers.
pub fn sample_pool(
    sampler: &(impl Sampler + ?Sized),
    seed: u64,
    first: u64,
    count: u64,
    clip_to: usize,
) -> Result<Vec<Subgraph>, SampleError> {
    (first..first + count)
        .into_par_iter()
        .map(|i| sample_subgraph(sampler, seed, i, clip_to))
        .collect()
}
