//! GAD augmentation of a partition (GAD-Partition, Zhao et al.): each part i gets replicas
//! of a few nodes of other parts, chosen by random walks from its boundary, so that an
//! L-layer GNN trained on the part sees the neighbourhood its boundary nodes depend on.
//!
//! The quantities, as implemented (docs/FORMAT.md and the README repeat them):
//! * boundary B_i: own nodes of part i with a neighbour in another part;
//! * a walk of part i: from a boundary node b (drawn uniformly from B_i), a first step to a
//!   uniformly drawn neighbour of b in another part, then L − 1 steps to uniform
//!   neighbours; its *outside nodes* are the distinct nodes not of part i it visits, in
//!   first-visit order. Each is within L hops of b along the walk;
//! * walk count n from the Monte-Carlo bound n = ⌈(1.96·σ/(x̄·0.05))²⌉: the estimated
//!   quantity is X = the number of outside nodes of a walk; x̄ and σ (sample standard
//!   deviation) come from a pilot of the first P walks (P = 100), n is clamped to
//!   [P, min(2^20, max(P, 16·|B_i|))], and the pilot walks are the first walks of the n;
//! * importance I(v) of an outside node: the fraction of the n walks that visit v;
//! * edge density of part i: ρ_i = 2·m_i / (|V_i|·(|V_i| − 1)) with m_i the edges among its
//!   own nodes (0 for |V_i| < 2), so ρ_i ∈ [0, 1];
//! * budget: at most ⌊α·(1 + ρ_i)·|V_i|⌋ replicas (α default 0.01);
//! * selection: walks in decreasing mean importance of their outside nodes (ties: walk
//!   index), each taken whole — all its outside nodes not yet replicated, in walk order
//!   (depth-first along the walk) — while it fits the budget; the first walk that does not
//!   fit stops the selection, so the count is the budget or one whole walk short of it.
//!
//! Walk j of part i is a pure function of (seed, i, j); parts run in parallel.
//!
//! Memory (issue 56 item 5): over an [`Adjacency`] read in place (the store's mapped CSR),
//! O(N) anonymous memory: one pass over the rows in id order finds every part's own count,
//! internal edges and boundary (≤ N ids in all), then the walks (≤ 2^20 per part, ≤ L
//! nodes each) and their visit counts; no copy of the graph.

use std::collections::HashMap;

use rayon::prelude::*;

use super::graph::Adjacency;
use super::PartitionError;
use crate::seed::{hash3, mix64, stream};

/// Parameters of [`augment`].
#[derive(Debug, Clone, Copy)]
pub struct AugmentOptions {
    /// L: walk length, the number of message-passing layers of the plan to be trained.
    pub layers: usize,
    /// α of the budget.
    pub alpha: f64,
    /// Seed of the walks.
    pub seed: u64,
    /// P: walks in the pilot sample.
    pub pilot: usize,
}

impl Default for AugmentOptions {
    fn default() -> Self {
        AugmentOptions {
            layers: 2,
            alpha: 0.01,
            seed: 0,
            pilot: PILOT_WALKS,
        }
    }
}

/// The longest walk length L taken: a plan's message-passing layers, and no published GNN
/// has more than a few hundred (GCNII's 64 the deepest shipped); past this a typo's L
/// (walks × L steps per part) would run for hours.
pub const MAX_LAYERS: usize = 1024;

/// The pilot sample's size P.
pub const PILOT_WALKS: usize = 100;
/// The walk count's cap per boundary node.
pub const WALKS_PER_BOUNDARY: usize = 16;
/// The walk count's absolute cap.
pub const MAX_WALKS: usize = 1 << 20;

/// What augmentation chose for one part.
#[derive(Debug, Clone, Default)]
pub struct PartAugmentation {
    /// |V_i|: own nodes.
    pub own: usize,
    /// |B_i|.
    pub boundary: usize,
    /// x̄ of the pilot.
    pub pilot_mean: f64,
    /// σ of the pilot.
    pub pilot_std: f64,
    /// n: walks drawn.
    pub walks: usize,
    /// m_i: edges among own nodes.
    pub internal_edges: u64,
    /// ρ_i.
    pub density: f64,
    /// ⌊α·(1 + ρ_i)·|V_i|⌋.
    pub budget: usize,
    /// Replicated nodes (ids of the partitioned graph), sorted.
    pub replicas: Vec<u32>,
    /// Walks taken whole.
    pub walks_taken: usize,
    /// New outside nodes of the walk that stopped the selection (did not fit the budget);
    /// `None` when the walks ran out first.
    pub stopped_by: Option<usize>,
}

/// Augmentation of every part.
#[derive(Debug, Clone)]
pub struct Augmentation {
    /// Part i's.
    pub parts: Vec<PartAugmentation>,
}

/// n from the Monte-Carlo bound for a pilot sample: ⌈(1.96·σ/(x̄·0.05))²⌉ with x̄ the mean
/// and σ the sample standard deviation of `pilot`, clamped to [|pilot|, max(|pilot|, cap)].
/// A pilot of fewer than two values or with x̄ ≤ 0 gives |pilot|.
pub fn walk_count(pilot: &[f64], cap: usize) -> usize {
    let p = pilot.len();
    if p < 2 {
        return p;
    }
    let mean = pilot.iter().sum::<f64>() / p as f64;
    if mean <= 0.0 || !mean.is_finite() {
        return p;
    }
    let var = pilot.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (p - 1) as f64;
    let n = (1.96 * var.sqrt() / (mean * 0.05)).powi(2).ceil();
    (n.min(usize::MAX as f64) as usize).clamp(p, cap.max(p))
}

/// ⌊α·(1 + ρ)·own⌋.
pub fn budget(alpha: f64, density: f64, own: usize) -> usize {
    (alpha * (1.0 + density) * own as f64).floor().max(0.0) as usize
}

/// ρ = 2m / (own·(own − 1)), 0 below two nodes.
pub fn density(internal_edges: u64, own: usize) -> f64 {
    if own < 2 {
        return 0.0;
    }
    2.0 * internal_edges as f64 / (own as f64 * (own as f64 - 1.0))
}

/// Augments each of the `k` parts of `part` (see the module's documentation).
pub fn augment<G: Adjacency + ?Sized>(
    g: &G,
    part: &[u32],
    k: usize,
    opts: &AugmentOptions,
) -> Result<Augmentation, PartitionError> {
    if !(opts.alpha >= 0.0 && opts.alpha.is_finite()) {
        return Err(PartitionError::argument(format!(
            "alpha = {}, expected a finite α ≥ 0",
            opts.alpha
        )));
    }
    if opts.layers > MAX_LAYERS {
        return Err(PartitionError::argument(format!(
            "L = {} (--layers): walks of more steps than {MAX_LAYERS}; L is the message-passing layers of the plan to be trained (the deepest shipped plans have 64)",
            opts.layers
        )));
    }
    if part.len() != g.n() || part.iter().any(|&p| p as usize >= k) {
        return Err(PartitionError::argument(
            "an assignment of every node to a part < k expected",
        ));
    }
    let sides = part_sides(g, part, k);
    let parts = sides
        .into_par_iter()
        .enumerate()
        .map(|(i, side)| augment_part(g, part, i as u32, side, opts))
        .collect();
    Ok(Augmentation { parts })
}

/// What one pass over the rows finds of a part: own nodes, twice its internal edges, and
/// its boundary (own nodes with a neighbour elsewhere) in id order.
#[derive(Default)]
struct Side {
    own: usize,
    twice_internal: u64,
    boundary: Vec<u32>,
}

/// Rows a worker scans at a time in [`part_sides`].
const SIDE_ROWS: usize = 1 << 16;

/// Every part's [`Side`] in one parallel pass over the rows (chunks of ids, joined in id
/// order: the boundaries come out sorted whatever the thread count).
fn part_sides<G: Adjacency + ?Sized>(g: &G, part: &[u32], k: usize) -> Vec<Side> {
    let n = g.n();
    let chunk = |c: usize| {
        let mut sides: Vec<Side> = (0..k).map(|_| Side::default()).collect();
        for u in c * SIDE_ROWS..n.min((c + 1) * SIDE_ROWS) {
            let i = part[u];
            let s = &mut sides[i as usize];
            s.own += 1;
            let inside = g.row(u).iter().filter(|&&v| part[v as usize] == i).count();
            s.twice_internal += inside as u64;
            if inside < g.row(u).len() {
                s.boundary.push(u as u32);
            }
        }
        sides
    };
    (0..n.div_ceil(SIDE_ROWS))
        .into_par_iter()
        .map(chunk)
        .reduce(
            || (0..k).map(|_| Side::default()).collect(),
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    x.own += y.own;
                    x.twice_internal += y.twice_internal;
                    x.boundary.extend(y.boundary);
                }
                a
            },
        )
}

fn augment_part<G: Adjacency + ?Sized>(
    g: &G,
    part: &[u32],
    i: u32,
    side: Side,
    opts: &AugmentOptions,
) -> PartAugmentation {
    let Side {
        own,
        twice_internal,
        boundary,
    } = side;
    let internal_edges = twice_internal / 2;
    let rho = density(internal_edges, own);
    let mut out = PartAugmentation {
        own,
        boundary: boundary.len(),
        internal_edges,
        density: rho,
        budget: budget(opts.alpha, rho, own),
        ..PartAugmentation::default()
    };
    if boundary.is_empty() || opts.layers == 0 || opts.pilot == 0 {
        return out;
    }
    let key = hash3(opts.seed, stream::GAD_WALKS, u64::from(i));
    let walk = |j: usize| {
        walk(
            g,
            part,
            i,
            &boundary,
            opts.layers,
            hash3(key, stream::GAD_WALKS, j as u64),
        )
    };
    let mut walks: Vec<Vec<u32>> = (0..opts.pilot).map(walk).collect();
    let pilot: Vec<f64> = walks.iter().map(|w| w.len() as f64).collect();
    let mean = pilot.iter().sum::<f64>() / pilot.len() as f64;
    let var =
        pilot.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (pilot.len().max(2) - 1) as f64;
    out.pilot_mean = mean;
    out.pilot_std = var.sqrt();
    let cap = MAX_WALKS.min(opts.pilot.max(WALKS_PER_BOUNDARY * boundary.len()));
    let n = walk_count(&pilot, cap);
    walks.extend((opts.pilot..n).map(walk));
    out.walks = n;
    // I(v): the fraction of walks visiting v (a walk's outside nodes are distinct).
    let mut visits: HashMap<u32, u32> = HashMap::new();
    for w in &walks {
        for &v in w {
            *visits.entry(v).or_default() += 1;
        }
    }
    let importance = |v: &u32| f64::from(visits[v]) / n as f64;
    let mut order: Vec<(f64, usize)> = walks
        .iter()
        .enumerate()
        .map(|(j, w)| (w.iter().map(importance).sum::<f64>() / w.len() as f64, j))
        .collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut chosen: HashMap<u32, ()> = HashMap::new();
    let mut replicas = Vec::new();
    for (_, j) in order {
        let new: Vec<u32> = walks[j]
            .iter()
            .copied()
            .filter(|v| !chosen.contains_key(v))
            .collect();
        if new.is_empty() {
            continue;
        }
        if replicas.len() + new.len() > out.budget {
            out.stopped_by = Some(new.len());
            break;
        }
        for v in new {
            chosen.insert(v, ());
            replicas.push(v);
        }
        out.walks_taken += 1;
    }
    replicas.sort_unstable();
    out.replicas = replicas;
    out
}

/// One walk of part `i` (see the module's documentation): its outside nodes, distinct, in
/// first-visit order.
fn walk<G: Adjacency + ?Sized>(
    g: &G,
    part: &[u32],
    i: u32,
    boundary: &[u32],
    layers: usize,
    mut h: u64,
) -> Vec<u32> {
    let mut next = |n: usize| {
        h = mix64(h.wrapping_add(0x9e37_79b9_7f4a_7c15));
        // Multiply-shift: uniform enough for n ≪ 2^32.
        ((u128::from(h) * n as u128) >> 64) as usize
    };
    let b = boundary[next(boundary.len())] as usize;
    let outside: Vec<usize> = g
        .row(b)
        .iter()
        .map(|&v| v as usize)
        .filter(|&v| part[v] != i)
        .collect();
    let mut cur = outside[next(outside.len())];
    let mut seen = vec![cur as u32];
    for _ in 1..layers {
        let row = g.row(cur);
        if row.is_empty() {
            break;
        }
        cur = row[next(row.len())] as usize;
        if part[cur] != i && !seen.contains(&(cur as u32)) {
            seen.push(cur as u32);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_count_follows_the_bound() {
        // x̄ = 2, σ = 1 (sample sd of 1,3 repeated): n = (1.96·1/(2·0.05))² = 384.16 → 385.
        let pilot: Vec<f64> = (0..100)
            .map(|j| if j % 2 == 0 { 1.0 } else { 3.0 })
            .collect();
        let mean = 2.0;
        let sd = (pilot.iter().map(|x: &f64| (x - mean).powi(2)).sum::<f64>() / 99.0).sqrt();
        let expect = (1.96 * sd / (mean * 0.05)).powi(2).ceil() as usize;
        assert_eq!(walk_count(&pilot, 10_000), expect);
        assert!((380..=390).contains(&expect));
        assert_eq!(walk_count(&pilot, 200), 200, "capped");
        assert_eq!(
            walk_count(&[2.0; 100], 10_000),
            100,
            "σ = 0: the pilot suffices"
        );
        assert_eq!(walk_count(&[0.0; 10], 10_000), 10, "x̄ = 0");
    }

    #[test]
    fn budget_and_density() {
        assert_eq!(density(0, 1), 0.0);
        assert_eq!(density(3, 3), 1.0);
        assert_eq!(budget(0.01, 0.0, 999), 9);
        assert_eq!(budget(0.01, 1.0, 1000), 20);
    }
}
