//! Online augmentation: departure nodes ∝ degree, random walks from them (uniform, or
//! node2vec's second order by rejection), and the pairs of walk nodes at most s steps
//! apart emitted as positive samples (all of them, or a pair k apart with probability
//! (s − k + 1)/s as word2vec's reduced window weighs them).
//!
//! node2vec without Σd² alias tables: from (t, v) a candidate x is a uniform neighbour of
//! v, kept with probability α(t, x)/max(1/p, 1, 1/q), α = 1/p if x = t, 1 if x is a
//! neighbour of t (binary search in t's sorted row), 1/q otherwise; accepted x is then
//! distributed ∝ α, the biased transition, in expected max(1/p,1,1/q)/E\[α\] draws (KnightKing's
//! rejection sampling). Memory: nothing beyond the CSR.

use rand_core::RngCore;

use super::eval::held_out;
use crate::plan::embedding::{EmbeddingModel, EmbeddingPlan, WindowWeights};
use crate::sample::alias::AliasTable;
use crate::sample::{below, random_neighbor, SampleError};
use crate::store::Csr;

/// Draws walks over one graph.
pub struct Walker<'g> {
    graph: Csr<'g>,
    departure: Option<AliasTable>,
    second_order: bool,
    /// 1/p, 1/q and the rejection envelope max(1/p, 1, 1/q).
    inv_p: f64,
    inv_q: f64,
    envelope: f64,
    /// Edges held out for link prediction: (fraction, seed) of [`held_out`].
    holdout: (f64, u64),
}

/// Draws per step before a walk whose every neighbour is held out stops there.
const MAX_TRIES: usize = 256;

impl<'g> Walker<'g> {
    /// A walker for `plan`'s model on `graph`.
    pub fn new(graph: Csr<'g>, plan: &EmbeddingPlan) -> Walker<'g> {
        Walker::with_pq(
            graph,
            plan.model == EmbeddingModel::Node2vec,
            plan.p,
            plan.q,
        )
    }

    /// A walker: uniform, or node2vec's (p, q) walk when `second_order`.
    pub fn with_pq(graph: Csr<'g>, second_order: bool, p: f64, q: f64) -> Walker<'g> {
        let deg: Vec<f64> = (0..graph.n_nodes() as u32)
            .map(|v| graph.degree(v) as f64)
            .collect();
        let (inv_p, inv_q) = (1.0 / p, 1.0 / q);
        Walker {
            graph,
            departure: AliasTable::new(&deg),
            second_order,
            inv_p,
            inv_q,
            envelope: inv_p.max(1.0).max(inv_q),
            holdout: (0.0, 0),
        }
    }

    /// Walks never cross the edges [`held_out`] at `fraction` under `seed` (link
    /// prediction's training graph, without a second store).
    pub fn hold_out(mut self, fraction: f64, seed: u64) -> Walker<'g> {
        self.holdout = (fraction, seed);
        self
    }

    #[inline]
    fn held(&self, u: u32, v: u32) -> bool {
        self.holdout.0 > 0.0 && held_out(u, v, self.holdout.0, self.holdout.1)
    }

    /// Whether the graph has an edge to walk (else no sample can be drawn).
    pub fn has_edges(&self) -> bool {
        self.departure.is_some()
    }

    /// A departure node, ∝ degree.
    #[inline]
    pub fn departure(&self, rng: &mut impl RngCore) -> Option<u32> {
        self.departure.as_ref().map(|t| t.sample(rng) as u32)
    }

    /// The next node after `cur`, having come from `prev` (None at the walk's start);
    /// None when every draw hit a held-out edge.
    #[inline]
    pub fn step(
        &self,
        prev: Option<u32>,
        cur: u32,
        rng: &mut impl RngCore,
    ) -> Result<Option<u32>, SampleError> {
        let t = match prev {
            Some(t) if self.second_order => t,
            _ => {
                for _ in 0..MAX_TRIES {
                    let x = random_neighbor(self.graph, cur, rng)?;
                    if !self.held(cur, x) {
                        return Ok(Some(x));
                    }
                }
                return Ok(None);
            }
        };
        let row = self.graph.try_neighbors(cur)?;
        let mut held = 0;
        loop {
            let x = row[below(rng, row.len() as u64) as usize];
            if self.held(cur, x) {
                held += 1;
                if held == MAX_TRIES {
                    return Ok(None);
                }
                continue;
            }
            let alpha = if x == t {
                self.inv_p
            } else if self.is_edge(t, x) && !self.held(t, x) {
                1.0
            } else {
                self.inv_q
            };
            let r = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) * self.envelope;
            if r < alpha {
                if x as usize >= self.graph.n_nodes() {
                    return Err(crate::store::StoreError::neighbor_out_of_range(
                        cur,
                        x,
                        self.graph.n_nodes() as u64,
                    )
                    .into());
                }
                return Ok(Some(x));
            }
        }
    }

    /// Whether x is a neighbour of t (t's row is sorted in a store).
    #[inline]
    fn is_edge(&self, t: u32, x: u32) -> bool {
        self.graph
            .try_neighbors(t)
            .is_ok_and(|row| row.binary_search(&x).is_ok())
    }

    /// Whether a walk takes a fixed count of random numbers, two for its departure and one
    /// per step: a uniform walk with nothing held out, on a graph with an edge.
    fn fixed_draws(&self) -> bool {
        !self.second_order && self.holdout.0 <= 0.0 && self.departure.is_some()
    }

    /// One walk of `steps` steps into each of `walks`: the same walks as [`Walker::walk`]
    /// on each in turn with `rng`. A walk is a chain of dependent reads (a node's offsets,
    /// then one entry of its row, for the next node), each a cache miss on a graph past
    /// L2, so one walk at a time waits on memory at every step. When a walk's random
    /// numbers are a fixed count (`Walker::fixed_draws`: DeepWalk's walks) they are
    /// drawn first, in the order one walk at a time would draw them, and the walks advance
    /// side by side, step t of every walk before step t + 1, with the next reads of each
    /// prefetched: the misses of all the walks overlap. Otherwise (node2vec's rejection,
    /// held-out edges: a draw count that depends on the walk) one walk at a time.
    pub fn walks(
        &self,
        steps: usize,
        rng: &mut impl RngCore,
        walks: &mut [Vec<u32>],
        scratch: &mut WalkScratch,
    ) -> Result<(), SampleError> {
        let Some(table) = self.departure.as_ref().filter(|_| self.fixed_draws()) else {
            for w in walks.iter_mut() {
                self.walk(steps, rng, w)?;
            }
            return Ok(());
        };
        let per = steps + 2;
        let WalkScratch { draws, next } = scratch;
        draws.clear();
        draws.extend((0..walks.len() * per).map(|_| rng.next_u64()));
        let (offsets, indices) = (self.graph.offsets(), self.graph.indices());
        let prefetch_row = |v: u32| {
            if let Some(o) = offsets.get(v as usize) {
                saintflow_ops::cache::prefetch_bytes(
                    std::ptr::from_ref(o).cast(),
                    2 * std::mem::size_of::<u64>(),
                );
            }
        };
        for (w, out) in walks.iter_mut().enumerate() {
            out.clear();
            let start = table.pick(draws[w * per], draws[w * per + 1]) as u32;
            out.push(start);
            prefetch_row(start);
        }
        next.clear();
        next.resize(walks.len(), 0);
        for t in 0..steps {
            // Where each walk goes: its node's row (offsets prefetched a step ago) and the
            // entry its random number picks, whose line is asked for now.
            for ((w, out), at) in walks.iter().enumerate().zip(next.iter_mut()) {
                let cur = *out.last().expect("a walk has its start");
                let row = self.graph.try_neighbors(cur)?;
                assert!(!row.is_empty(), "the caller's node has a neighbour");
                let k = crate::sample::scale(draws[w * per + 2 + t], row.len() as u64) as usize;
                *at = offsets[cur as usize] as usize + k;
                saintflow_ops::cache::prefetch_bytes(
                    std::ptr::from_ref(&indices[*at]).cast(),
                    std::mem::size_of::<u32>(),
                );
            }
            for (out, &at) in walks.iter_mut().zip(next.iter()) {
                let cur = *out.last().expect("a walk has its start");
                let v = indices[at];
                if v as usize >= self.graph.n_nodes() {
                    return Err(crate::store::StoreError::neighbor_out_of_range(
                        cur,
                        v,
                        self.graph.n_nodes() as u64,
                    )
                    .into());
                }
                out.push(v);
                prefetch_row(v);
            }
        }
        Ok(())
    }

    /// A walk of `steps` steps from a departure node into `out` (cleared first); shorter
    /// only if the graph has no edge.
    pub fn walk(
        &self,
        steps: usize,
        rng: &mut impl RngCore,
        out: &mut Vec<u32>,
    ) -> Result<(), SampleError> {
        out.clear();
        let Some(start) = self.departure(rng) else {
            return Ok(());
        };
        out.push(start);
        let mut prev = None;
        for _ in 0..steps {
            let cur = *out.last().expect("a walk has its start");
            let Some(next) = self.step(prev, cur, rng)? else {
                break;
            };
            prev = Some(cur);
            out.push(next);
        }
        Ok(())
    }
}

/// Reused buffers of [`Walker::walks`].
#[derive(Debug, Default)]
pub struct WalkScratch {
    /// The batch's random numbers, walk by walk.
    draws: Vec<u64>,
    /// Per walk, the index into the CSR's `indices` of its next node.
    next: Vec<usize>,
}

/// Positive samples of a walk of `len` nodes with window s: Σ_{k=1..s} (len − k).
pub fn pairs_per_walk(len: usize, window: usize) -> usize {
    (1..=window.min(len.saturating_sub(1)))
        .map(|k| len - k)
        .sum()
}

/// Emits the positive samples of a batch of walks, pseudo-shuffled: offset k = 1..s
/// outermost, then position i, then walk, so that consecutive samples come from different
/// walks and distances (GraphVite's pseudo shuffle; samples of one walk are strongly
/// correlated and SGD on them in a row converges worse). With [`WindowWeights::Linear`] a
/// pair k apart is kept with probability (s − k + 1)/s, drawn from `rng` (pairs 1 apart
/// always, without a draw). `emit` returns false to stop.
pub fn emit_pairs(
    walks: &[Vec<u32>],
    window: usize,
    weights: WindowWeights,
    rng: &mut impl RngCore,
    mut emit: impl FnMut(u32, u32) -> bool,
) -> bool {
    let longest = walks.iter().map(Vec::len).max().unwrap_or(0);
    let linear = weights == WindowWeights::Linear;
    for k in 1..=window {
        for i in 0..longest.saturating_sub(k) {
            for w in walks {
                if i + k >= w.len() {
                    continue;
                }
                // Dropped with probability (k − 1)/s.
                if linear && k > 1 && below(rng, window as u64) < (k - 1) as u64 {
                    continue;
                }
                if !emit(w[i], w[i + k]) {
                    return false;
                }
            }
        }
    }
    true
}
