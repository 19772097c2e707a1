//! The sample pool: positive samples (u, v) packed as u64, filled by samplers in fixed
//! chunks of [`CHUNK`] samples, each chunk then bucketed in place by grid block
//! (part(u), part(v)), so the trainer of block (i, j) reads its samples chunk by chunk and
//! nothing is copied. Two pools alternate (one filled while the other trains); their size
//! comes from the memory budget, never from |V|.
//!
//! Chunk c of the run (samples c·CHUNK..) draws from the stream hash(seed, EMB_WALKS, c),
//! so the samples of a run do not depend on the pool size or the thread count.

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use crate::plan::embedding::WindowWeights;
use crate::sample::SampleError;
use crate::seed::{hash3, stream};

use super::partition::Parts;
use super::walk::{emit_pairs, WalkScratch, Walker};

/// Samples per chunk: 64 Ki (512 KiB), the unit of parallel filling and of the seeding.
pub const CHUNK: usize = 1 << 16;

/// Bytes per sample in a pool.
pub const SAMPLE_BYTES: usize = 8;

/// One pool of samples, bucketed by block within each chunk.
#[derive(Debug, Default)]
pub struct Pool {
    pairs: Vec<u64>,
    /// Per chunk, n² + 1 bucket bounds (absolute indices into `pairs`).
    bounds: Vec<Vec<usize>>,
    n: usize,
}

/// What fills a pool: the walker, the walk's shape and the grid's parts.
pub struct Sampler<'a> {
    /// The walks.
    pub walker: &'a Walker<'a>,
    /// Steps per walk.
    pub walk_length: usize,
    /// Augmentation distance s.
    pub window: usize,
    /// How pairs are weighted by distance.
    pub window_weights: WindowWeights,
    /// Walks per pseudo-shuffled batch.
    pub shuffle_walks: usize,
    /// The grid's parts.
    pub parts: &'a Parts,
    /// The run's seed.
    pub seed: u64,
}

impl<'a> Sampler<'a> {
    /// The sampler of `plan`'s walks over `parts`, seeded `seed`.
    pub fn new(
        walker: &'a Walker<'a>,
        plan: &crate::plan::embedding::EmbeddingPlan,
        parts: &'a Parts,
        seed: u64,
    ) -> Sampler<'a> {
        Sampler {
            walker,
            walk_length: plan.walk_length,
            window: plan.window,
            window_weights: plan.window_weights,
            shuffle_walks: plan.shuffle_walks,
            parts,
            seed,
        }
    }
}

#[inline]
fn pack(u: u32, v: u32) -> u64 {
    (u64::from(u) << 32) | u64::from(v)
}

/// (u, v) of a packed sample.
#[inline]
pub fn unpack(x: u64) -> (u32, u32) {
    ((x >> 32) as u32, x as u32)
}

impl Pool {
    /// Samples held.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Refills the pool with samples `first..first + len` of the run (`first` a multiple of
    /// [`CHUNK`]), in parallel on the current rayon pool. The buffer is reused.
    pub fn fill(&mut self, s: &Sampler<'_>, first: u64, len: usize) -> Result<(), SampleError> {
        debug_assert_eq!(first % CHUNK as u64, 0);
        let n = s.parts.n();
        self.n = n;
        // Not cleared first: `fill_chunk` writes every sample, so a refill of a pool of the
        // same size zeroes nothing.
        self.pairs.resize(len, 0);
        let base = first / CHUNK as u64;
        let bounds: Result<Vec<Vec<usize>>, SampleError> = self
            .pairs
            .par_chunks_mut(CHUNK)
            .enumerate()
            .map(|(c, out)| {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(hash3(
                    s.seed,
                    stream::EMB_WALKS,
                    base + c as u64,
                ));
                fill_chunk(s, &mut rng, out)?;
                let mut b = bucket(out, n, s.parts);
                for x in &mut b {
                    *x += c * CHUNK;
                }
                Ok(b)
            })
            .collect();
        self.bounds = bounds?;
        Ok(())
    }

    /// Block (i, j)'s samples: one slice per chunk.
    pub fn block(&self, i: usize, j: usize) -> impl Iterator<Item = &[u64]> + '_ {
        let k = i * self.n + j;
        self.bounds.iter().map(move |b| &self.pairs[b[k]..b[k + 1]])
    }

    /// Block (i, j)'s samples as (offset into [`Pool::pairs`], length) per chunk.
    pub fn segments(&self, i: usize, j: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let k = i * self.n + j;
        self.bounds.iter().map(move |b| (b[k], b[k + 1] - b[k]))
    }

    /// Every sample, chunk after chunk, each chunk bucketed by block.
    pub fn pairs(&self) -> &[u64] {
        &self.pairs
    }

    /// Samples in block (i, j).
    pub fn block_len(&self, i: usize, j: usize) -> usize {
        let k = i * self.n + j;
        self.bounds.iter().map(|b| b[k + 1] - b[k]).sum()
    }
}

/// Fills `out` with the pseudo-shuffled samples of batches of walks.
fn fill_chunk(
    s: &Sampler<'_>,
    rng: &mut Xoshiro256PlusPlus,
    out: &mut [u64],
) -> Result<(), SampleError> {
    let mut walks: Vec<Vec<u32>> = vec![Vec::with_capacity(s.walk_length + 1); s.shuffle_walks];
    let mut scratch = WalkScratch::default();
    let mut at = 0;
    while at < out.len() {
        s.walker
            .walks(s.walk_length, rng, &mut walks, &mut scratch)?;
        if walks.iter().all(|w| w.len() < 2) {
            // No edge anywhere: nothing to sample (the trainer refuses such a graph first).
            out[at..].fill(0);
            return Ok(());
        }
        emit_pairs(&walks, s.window, s.window_weights, rng, |u, v| {
            out[at] = pack(u, v);
            at += 1;
            at < out.len()
        });
    }
    Ok(())
}

/// Sorts `a` in place by block part(u)·n + part(v) (American flag sort: one counting pass,
/// then cycles of swaps) and returns the n² + 1 bucket bounds.
fn bucket(a: &mut [u64], n: usize, parts: &Parts) -> Vec<usize> {
    let key = |x: u64| {
        let (u, v) = unpack(x);
        parts.part(u) * n + parts.part(v)
    };
    let buckets = n * n;
    let mut bounds = vec![0usize; buckets + 1];
    for &x in a.iter() {
        bounds[key(x) + 1] += 1;
    }
    for b in 0..buckets {
        bounds[b + 1] += bounds[b];
    }
    let mut next = bounds[..buckets].to_vec();
    for b in 0..buckets {
        while next[b] < bounds[b + 1] {
            let k = key(a[next[b]]);
            if k == b {
                next[b] += 1;
            } else {
                a.swap(next[b], next[k]);
                next[k] += 1;
            }
        }
    }
    bounds
}
