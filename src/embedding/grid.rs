//! Parallel negative sampling on the n × n partition grid (GraphVite §3.2): a pool's samples
//! are bucketed by block (part(u), part(v)); an episode trains the pool in n rounds, round r
//! running blocks (i, (i + r) mod n) for every i, block (i, j) drawing its negatives from
//! context part j only. The n blocks of a round are orthogonal — distinct vertex parts and
//! distinct context parts — so however the workers share them (n is a multiple of the
//! workers, [`super::grid_parts`]: more parts than workers keep a block's rows in L2), no
//! two workers read or write the same row of either matrix, and the SGD needs no locks
//! and loses no update. Rounds are separated by the join
//! of a parallel loop (a barrier). [`Touch`] lets a test record every row a block touches
//! (`tests/embedding.rs` checks disjointness on the real training path); in a run it is
//! [`NoTouch`] and compiles away.

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use saintflow_ops::sgns::{sgns_apply, sgns_loss, sgns_sample, sgns_term, MAX_SAMPLE_TERMS};

use crate::seed::{hash3, stream};

use super::partition::Parts;
use super::pool::{unpack, Pool};

/// Observes the rows a block touches.
pub trait Touch: Sync {
    /// Block `(i, j)` of round `round` touched row `row` of the vertex matrix (`context`
    /// false) or of the context matrix (true).
    fn touch(&self, round: usize, i: usize, j: usize, context: bool, row: u32);

    /// Whether anything is recorded (the GPU path records rows on the device only then).
    fn enabled(&self) -> bool {
        true
    }
}

/// Records nothing.
pub struct NoTouch;

impl Touch for NoTouch {
    #[inline(always)]
    fn touch(&self, _: usize, _: usize, _: usize, _: bool, _: u32) {}

    fn enabled(&self) -> bool {
        false
    }
}

/// A [rows, dim] f32 matrix shared by the grid's workers through a raw pointer: each
/// worker takes `&mut` rows of its own parts only (the grid's invariant above).
#[derive(Clone, Copy)]
pub struct Rows {
    ptr: *mut f32,
    rows: usize,
    dim: usize,
}

// SAFETY: `Rows` is a pointer to a matrix that outlives the episode; the grid hands each
// row to at most one worker at a time (orthogonal blocks per round).
unsafe impl Send for Rows {}
// SAFETY: as above.
unsafe impl Sync for Rows {}

impl Rows {
    /// The rows of `data` ([rows, dim] row-major), borrowed for the episode.
    pub fn new(data: &mut [f32], dim: usize) -> Rows {
        Rows {
            ptr: data.as_mut_ptr(),
            rows: data.len().checked_div(dim).unwrap_or(0),
            dim,
        }
    }

    /// Row r.
    ///
    /// # Safety
    /// No other reference to row r may be live while the returned one is.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    unsafe fn row<'a>(&self, r: u32) -> &'a mut [f32] {
        let r = r as usize;
        assert!(r < self.rows, "row {r} of a {}-row matrix", self.rows);
        // SAFETY: in bounds (checked above); exclusivity is the caller's.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r * self.dim), self.dim) }
    }

    /// Asks the CPU to bring row r into the cache (a hint: no reference is made, so it may
    /// name a row another worker is writing; out-of-range rows are ignored).
    #[inline]
    fn prefetch(&self, r: u32) {
        let r = r as usize;
        if r >= self.rows {
            return;
        }
        let row = self
            .ptr
            .wrapping_add(r * self.dim)
            .cast_const()
            .cast::<u8>();
        saintflow_ops::cache::prefetch_bytes(row, self.dim * std::mem::size_of::<f32>());
    }
}

/// Whether the positive context `v` and the negatives `ns` are distinct rows (the
/// whole-sample kernel's condition). A repeat is rare: a negative is one of a part's
/// thousands of rows.
#[inline]
fn distinct(v: u32, ns: &[u32]) -> bool {
    ns.iter()
        .enumerate()
        .all(|(k, &n)| n != v && !ns[..k].contains(&n))
}

/// How many samples ahead of the one being trained its rows are prefetched.
const PREFETCH_AHEAD: usize = 4;

/// The hyper-parameters of the SGD.
#[derive(Clone, Copy, Debug)]
pub struct Sgd {
    /// Initial learning rate.
    pub lr: f32,
    /// Negatives per positive sample.
    pub negatives: usize,
    /// Weight of a negative term.
    pub negative_weight: f32,
    /// Positive samples of the whole run (the decay's horizon).
    pub total: f64,
}

/// What an episode reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct EpisodeStats {
    /// Σ of the loss over the sampled samples (every 16th), and their count.
    pub loss_sum: f64,
    /// Samples whose loss was summed.
    pub loss_count: u64,
    /// Samples trained.
    pub samples: u64,
}

impl EpisodeStats {
    fn add(mut self, o: EpisodeStats) -> EpisodeStats {
        self.loss_sum += o.loss_sum;
        self.loss_count += o.loss_count;
        self.samples += o.samples;
        self
    }
}

/// The seed of pool `index`'s negatives in a run seeded `seed` (the GPU's too: `device`, `cuda`).
pub fn pool_seed(seed: u64, index: u64) -> u64 {
    hash3(seed, stream::EMB_NEGATIVES, index)
}

/// The seed of block (i, j)'s negatives in episode `e` of a pool seeded `pool_seed`.
pub fn block_seed(pool_seed: u64, e: usize, i: usize, j: usize, n: usize) -> u64 {
    hash3(pool_seed, e as u64, (i * n + j) as u64)
}

/// The decay's clock for a block: `(at, step)`, so that the block's k-th sample trains at
/// `at + k·step` samples into the run. `done` samples came before the pool; the pool
/// (`pool_len` samples) is trained in `m` episodes of `n` rounds, and this block trains
/// `range_len` samples in round `r` of episode `e`.
pub fn block_clock(
    done: u64,
    pool_len: usize,
    (n, m): (usize, usize),
    (e, r): (usize, usize),
    range_len: usize,
) -> (f64, f64) {
    let at = done as f64 + pool_len as f64 * (e as f64 + r as f64 / n as f64) / m as f64;
    let step = pool_len as f64 / (n * m) as f64 / range_len.max(1) as f64;
    (at, step)
}

/// The learning rate of the sample trained at `clock` samples into a run of `sgd.total`.
#[inline]
pub fn learning_rate(sgd: &Sgd, clock: f64) -> f32 {
    sgd.lr * (1.0 - clock / sgd.total).max(1e-4) as f32
}

/// Samples per block per episode (GraphVite's episode size): an episode trains every
/// block of the grid once, so the matrices see all blocks' samples interleaved at this
/// grain, not the diagonal blocks' whole share of a pool before the next diagonal's.
/// 16 Ki samples at d = 128 are ~5 ms of SGD, far above the cost of a round's barrier.
pub const EPISODE_BLOCK_SAMPLES: usize = 1 << 14;

/// What stays the same for every pool of a run: the parts, both matrices, the SGD's
/// hyper-parameters, the run's seed and the observer.
pub struct Grid<'a, T: Touch> {
    /// The n parts of the rows.
    pub parts: &'a Parts,
    /// The vertex matrix.
    pub vertex: Rows,
    /// The context matrix.
    pub context: Rows,
    /// The SGD's hyper-parameters.
    pub sgd: Sgd,
    /// The run's seed (with the pool's index, it seeds the negatives).
    pub seed: u64,
    /// Observes the rows each block touches.
    pub touch: &'a T,
}

impl<T: Touch> Grid<'_, T> {
    /// Trains one pool in episodes of n rounds of n orthogonal blocks, each block taking
    /// the next 1/m of its samples per episode. `index` numbers the pool in the run (it
    /// seeds the negatives), `done` is the samples trained before it (the decay's clock).
    pub fn train_pool(&self, pool: &Pool, index: u64, done: u64) -> EpisodeStats {
        let n = self.parts.n();
        let m = pool.len().div_ceil(n * n * EPISODE_BLOCK_SAMPLES).max(1);
        let pseed = pool_seed(self.seed, index);
        let mut stats = EpisodeStats::default();
        for e in 0..m {
            for r in 0..n {
                let s = (0..n)
                    .into_par_iter()
                    .map(|i| {
                        let j = (i + r) % n;
                        let len = pool.block_len(i, j);
                        let range = (len * e / m, len * (e + 1) / m);
                        let clock =
                            block_clock(done, pool.len(), (n, m), (e, r), range.1 - range.0);
                        let rng = block_seed(pseed, e, i, j, n);
                        self.block(pool, (r, i, j), range, clock, rng)
                    })
                    .reduce(EpisodeStats::default, EpisodeStats::add);
                stats = stats.add(s);
            }
        }
        stats
    }

    /// Samples `range` of block (i, j) in round r: for each sample (u, v), a positive term
    /// on (u, v) and `negatives` negative terms on (u, x), x from context part j. The
    /// decay's clock reads `at + k·step` at the block's k-th sample; `seed` seeds the
    /// block's negatives.
    fn block(
        &self,
        pool: &Pool,
        (r, i, j): (usize, usize, usize),
        (lo, hi): (usize, usize),
        (at, step): (f64, f64),
        seed: u64,
    ) -> EpisodeStats {
        let Grid {
            parts,
            vertex,
            context,
            sgd,
            touch,
            ..
        } = *self;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut acc = vec![0f32; vertex.dim];
        let mut stats = EpisodeStats::default();
        // Negatives per sample: none when context part j has no edges (`Parts::negative`
        // is None there, and the term-by-term loop stopped at its first None).
        let negatives = if parts.noise(j).is_some() {
            sgd.negatives
        } else {
            0
        };
        let mut negs: Vec<u32> = Vec::new();
        let mut rows: Vec<&mut [f32]> = Vec::with_capacity(negatives + 1);
        let mut logits = [0f32; MAX_SAMPLE_TERMS];
        let mut k = 0u64;
        let mut skip = lo;
        let mut left = hi - lo;
        for chunk in pool.block(i, j) {
            if skip >= chunk.len() {
                skip -= chunk.len();
                continue;
            }
            let take = (chunk.len() - skip).min(left);
            let part = &chunk[skip..skip + take];
            skip = 0;
            left -= take;
            // The slice's negatives, drawn up front in sample order: the generator's only
            // use in a block, so the same draws as one sample at a time, and a later
            // sample's negatives are known in time to prefetch their rows.
            negs.clear();
            negs.extend((0..part.len() * negatives).map_while(|_| parts.negative(j, &mut rng)));
            for (t, &x) in part.iter().enumerate() {
                // The rows of a later sample come in while this one trains (random rows of
                // matrices larger than L2: latency, not arithmetic, bounds the step).
                if let Some(&y) = part.get(t + PREFETCH_AHEAD) {
                    let (pu, pv) = unpack(y);
                    vertex.prefetch(pu);
                    context.prefetch(pv);
                    let at = (t + PREFETCH_AHEAD) * negatives;
                    for &n in &negs[at..at + negatives] {
                        context.prefetch(n);
                    }
                }
                let (u, v) = unpack(x);
                let ns = &negs[t * negatives..(t + 1) * negatives];
                let lr = learning_rate(&sgd, at + k as f64 * step);
                touch.touch(r, i, j, false, u);
                touch.touch(r, i, j, true, v);
                for &n in ns {
                    touch.touch(r, i, j, true, n);
                }
                // SAFETY: u is in vertex part i, v and every negative in context part j (the
                // pool's bucketing and `Parts::negative`), and no other block of this round
                // has part i or part j; within the block, a row is referenced once at a time
                // (the whole sample's rows at once only when they are distinct).
                let urow = unsafe { vertex.row(u) };
                let sample_loss = k.is_multiple_of(16);
                let mut loss = 0.0;
                if ns.len() < MAX_SAMPLE_TERMS && distinct(v, ns) {
                    rows.push(unsafe { context.row(v) });
                    rows.extend(ns.iter().map(|&n| unsafe { context.row(n) }));
                    sgns_sample(urow, &mut rows, (1.0, sgd.negative_weight), lr, &mut logits);
                    rows.clear();
                    if sample_loss {
                        loss = sgns_loss(logits[0], true, 1.0);
                        for &s in &logits[1..1 + ns.len()] {
                            loss += sgns_loss(s, false, sgd.negative_weight);
                        }
                    }
                } else {
                    // A repeated row: the terms in order, each on the rows the earlier
                    // ones left (what the whole-sample kernel equals when rows differ).
                    for (t, &c) in std::iter::once(&v).chain(ns).enumerate() {
                        let (pos, w) = if t == 0 {
                            (true, 1.0)
                        } else {
                            (false, sgd.negative_weight)
                        };
                        let s = sgns_term(urow, unsafe { context.row(c) }, &mut acc, pos, w, lr);
                        if sample_loss {
                            loss += sgns_loss(s, pos, w);
                        }
                    }
                    sgns_apply(urow, &mut acc);
                }
                if sample_loss {
                    stats.loss_sum += loss;
                    stats.loss_count += 1;
                }
                k += 1;
            }
            if left == 0 {
                break;
            }
        }
        stats.samples = k;
        stats
    }
}
