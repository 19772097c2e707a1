//! Link prediction's training batches (issue 52): the target edges of a sampled subgraph
//! and their negatives, drawn after the subgraph, with the targets (both directions) taken
//! out of the subgraph's message-passing structure when asked.
//!
//! One step: the subgraph's undirected edges `{i, j}` (local ids, `i < j`, each edge once)
//! are targets each with probability `fraction` (seeded per step); every target gets K
//! negatives `(i, w)` with the same source and a tail `w` drawn among the subgraph's nodes
//! (uniformly, ∝ deg^0.75 in the sampled graph, or another target's tail: in-batch) — or,
//! with [`NegativeEnds::Both`], `(w₁, w₂)` with both ends drawn so (in-batch: another
//! target's source and another's tail) — a
//! true edge of the sampled graph redrawn when `exclude_true` (up to [`REDRAWS`] times, then
//! kept: a node adjacent to nearly the whole subgraph has almost no negatives to give).
//! With `exclude_targets` the targets' entries (i, j) and (j, i) leave the subgraph, so no
//! target edge is in the graph its own endpoints aggregate over in that step (DGL's
//! `exclude='reverse_id'`, GraphStorm's `exclude_training_targets`).
//!
//! Loss weights: with GraphSAINT's normalisation counts, target e = (u, v) weighs
//! 1/λ_e = N_pre / (fraction · C_{u,v} · M) (M the sampled graph's undirected edges), so the
//! step's loss Σ_e ℓ_e/λ_e is an unbiased estimate of the mean over all M edges, as the
//! node loss's 1/λ_v is over nodes (JPDC §3.2, with the edge as the unit of the loss);
//! without counts each target weighs 1/P (the step's mean, PyTorch Geometric's GAE). Each
//! negative weighs its positive's weight / K, so positives and negatives weigh alike
//! (PyG's `pos_loss + neg_loss`).
//!
//! Everything is a pure function of (seed, step, subgraph): subgraph i's batch depends only
//! on (seed, i), whatever the threads or the pool.

use std::sync::Arc;

use rand_core::{RngCore, SeedableRng};

use super::alias::AliasTable;
use super::{below, NormCounts, SampleRng, Subgraph};
use crate::seed::{hash3, stream};
use crate::store::Csr;

/// Redraws of a negative that hit a true edge before it is kept (`exclude_true`).
pub const REDRAWS: usize = 32;

/// Where a target's negative tails come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NegativeDist {
    /// Uniform over the subgraph's nodes (PyG's `negative_sampling` on the batch, DGL's
    /// `Uniform`).
    Uniform,
    /// ∝ deg^0.75 in the sampled graph, over the subgraph's nodes (word2vec's and
    /// GraphVite's noise distribution).
    Degree,
    /// Another target's tail (in-batch negatives: GraphStorm's `inbatch_joint`).
    InBatch,
}

impl NegativeDist {
    /// Every distribution by its plan name.
    pub const ALL: [(&'static str, NegativeDist); 3] = [
        ("uniform", NegativeDist::Uniform),
        ("degree", NegativeDist::Degree),
        ("in_batch", NegativeDist::InBatch),
    ];

    /// The plan name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, d)| *d == self)
            .map(|(n, _)| *n)
            .expect("every distribution is in ALL")
    }
}

/// Which end of a target a negative redraws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NegativeEnds {
    /// The tail: negative (u, w) of target (u, v), the source kept (DGL's `Uniform(k)`,
    /// OGB's ogbl-citation2 evaluation; what a softmax of a source's candidates ranks).
    Tail,
    /// Both ends, drawn alike and independently: (w₁, w₂), as PyG's `negative_sampling` and
    /// DGL's `GlobalUniform` draw pairs.
    Both,
}

impl NegativeEnds {
    /// Every choice by its plan name.
    pub const ALL: [(&'static str, NegativeEnds); 2] =
        [("tail", NegativeEnds::Tail), ("both", NegativeEnds::Both)];

    /// The plan name.
    pub fn name(self) -> &'static str {
        match self {
            NegativeEnds::Tail => "tail",
            NegativeEnds::Both => "both",
        }
    }
}

/// How a link plan draws its training targets and negatives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSampling {
    /// Probability that an edge of the subgraph is a target, in (0, 1].
    pub fraction: f64,
    /// Negatives per target, ≥ 1.
    pub negatives: usize,
    /// Where negative tails come from.
    pub dist: NegativeDist,
    /// Which ends a negative redraws (the tail, or both from `dist`).
    pub ends: NegativeEnds,
    /// Redraw negatives that are true edges of the sampled graph.
    pub exclude_true: bool,
    /// Take the targets out of the step's message passing.
    pub exclude_targets: bool,
}

impl Default for LinkSampling {
    fn default() -> Self {
        LinkSampling {
            fraction: 1.0,
            negatives: 1,
            dist: NegativeDist::Uniform,
            ends: NegativeEnds::Tail,
            exclude_true: false,
            exclude_targets: false,
        }
    }
}

impl LinkSampling {
    /// Expected pairs (targets and their negatives) of a subgraph of `entries` directed
    /// entries: what the planner and the memory check size a step's pair values by.
    pub fn expected_pairs(&self, entries: usize) -> usize {
        (entries as f64 / 2.0 * self.fraction * (1 + self.negatives) as f64).ceil() as usize
    }
}

/// A step's scored pairs, in subgraph-local ids: the P targets first, then their P·K
/// negatives, negative j of target i at `P + i·K + j`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkBatch {
    /// Source of each pair.
    pub src: Vec<u32>,
    /// Tail of each pair.
    pub dst: Vec<u32>,
    /// Targets P.
    pub positives: usize,
    /// Negatives per target K.
    pub k: usize,
    /// Loss weight of each pair.
    pub weights: Vec<f32>,
}

impl LinkBatch {
    /// Pairs scored: P · (1 + K).
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// No pairs.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Whether pair `i` is a target (label 1) rather than a negative.
    pub fn is_positive(&self, i: usize) -> bool {
        i < self.positives
    }
}

/// GraphSAINT's loss weight of a target from its entry's position in `graph` (the sampled
/// graph `norm` counted): 1/λ_e = N_pre / (fraction · C_e · M), M the graph's undirected
/// edges; an entry the pre-sampling never drew (C_e = 0) weighs as one counted a tenth of
/// a time. The `target_weight` that the trainer's source and the Python package's
/// `LinkSampler` hand [`attach_targets`], so both weigh a batch alike.
pub fn saint_target_weight<'a>(
    norm: &'a NormCounts,
    fraction: f64,
    graph: Csr<'_>,
) -> impl Fn(u64) -> f32 + 'a {
    let scale = norm.meta.subgraphs as f64 / (fraction * (graph.n_entries() as f64 / 2.0).max(1.0));
    move |entry: u64| match norm.edge_count(entry) {
        0 => (scale * 10.0) as f32,
        c => (scale / f64::from(c)) as f32,
    }
}

/// Draws subgraph `step`'s targets and negatives on `sub` (induced from `graph`) and
/// attaches them (`sub.link`), taking the targets out of `sub`'s structure when
/// `cfg.exclude_targets`. `target_weight(entry)` gives a target's loss weight from its
/// entry's position in `graph` (GraphSAINT's 1/λ_e), or None for the step's mean.
pub fn attach_targets(
    sub: &mut Subgraph,
    graph: Csr<'_>,
    cfg: &LinkSampling,
    seed: u64,
    step: u64,
    target_weight: Option<&dyn Fn(u64) -> f32>,
) {
    let mut rng = SampleRng::seed_from_u64(hash3(seed, stream::LINK_TARGETS, step));
    // Targets: each undirected edge i < j once, kept with probability `fraction`.
    let threshold = (cfg.fraction.clamp(0.0, 1.0) * 2f64.powi(53)) as u64;
    let mut targets: Vec<(u32, u32, u64)> = Vec::new();
    for i in 0..sub.n_nodes() {
        for k in sub.offsets[i] as usize..sub.offsets[i + 1] as usize {
            let j = sub.indices[k];
            if (j as usize) > i && (rng.next_u64() >> 11) < threshold {
                targets.push((i as u32, j, sub.parent_entries[k]));
            }
        }
    }
    let p = targets.len();
    let kneg = cfg.negatives.max(1);
    let mut batch = LinkBatch {
        src: Vec::with_capacity(p * (1 + kneg)),
        dst: Vec::with_capacity(p * (1 + kneg)),
        positives: p,
        k: kneg,
        weights: Vec::with_capacity(p * (1 + kneg)),
    };
    for &(i, j, entry) in &targets {
        batch.src.push(i);
        batch.dst.push(j);
        batch
            .weights
            .push(target_weight.map_or(1.0 / p as f32, |w| w(entry)));
    }
    let n = sub.n_nodes();
    let alias = match cfg.dist {
        NegativeDist::Degree if n > 0 => {
            let w: Vec<f64> = sub
                .nodes
                .iter()
                .map(|&v| (graph.degree(v) as f64).powf(0.75).max(1e-3))
                .collect();
            AliasTable::new(&w)
        }
        _ => None,
    };
    let draw = |rng: &mut SampleRng, ends: &[u32]| match cfg.dist {
        NegativeDist::Uniform => below(rng, n as u64) as u32,
        NegativeDist::Degree => match &alias {
            Some(a) => a.sample(rng) as u32,
            None => below(rng, n as u64) as u32,
        },
        NegativeDist::InBatch => ends[below(rng, p as u64) as usize],
    };
    let (sources, tails) = (batch.src[..p].to_vec(), batch.dst[..p].to_vec());
    for t in 0..p {
        let wt = batch.weights[t] / kneg as f32;
        for _ in 0..kneg {
            let (mut u, mut w) = (sources[t], 0);
            for _ in 0..=REDRAWS {
                if cfg.ends == NegativeEnds::Both {
                    u = draw(&mut rng, &sources);
                }
                w = draw(&mut rng, &tails);
                if !cfg.exclude_true || !is_edge(sub, graph, u, w) {
                    break;
                }
            }
            batch.src.push(u);
            batch.dst.push(w);
            batch.weights.push(wt);
        }
    }
    if cfg.exclude_targets && p > 0 {
        remove_targets(sub, &targets);
    }
    sub.link = Some(Arc::new(batch));
}

/// Whether local pair (u, w) is a true edge of `graph` (a self pair counts as one).
fn is_edge(sub: &Subgraph, graph: Csr<'_>, u: u32, w: u32) -> bool {
    u == w
        || graph
            .neighbors(sub.nodes[u as usize])
            .binary_search(&sub.nodes[w as usize])
            .is_ok()
}

/// Removes every target's entries, (i, j) and (j, i), from `sub`'s CSR.
fn remove_targets(sub: &mut Subgraph, targets: &[(u32, u32, u64)]) {
    let mut gone: Vec<(u32, u32)> = targets
        .iter()
        .flat_map(|&(i, j, _)| [(i, j), (j, i)])
        .collect();
    gone.sort_unstable();
    let (mut w, mut g) = (0usize, 0usize);
    let mut start = 0usize;
    for i in 0..sub.n_nodes() {
        let end = sub.offsets[i + 1] as usize;
        for k in start..end {
            let j = sub.indices[k];
            while g < gone.len() && gone[g] < (i as u32, j) {
                g += 1;
            }
            if g < gone.len() && gone[g] == (i as u32, j) {
                continue;
            }
            sub.indices[w] = j;
            sub.parent_entries[w] = sub.parent_entries[k];
            w += 1;
        }
        start = end;
        sub.offsets[i + 1] = w as u32;
    }
    sub.indices.truncate(w);
    sub.parent_entries.truncate(w);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::induce;

    /// A 6-cycle plus the chord 0–3, symmetric CSR.
    fn graph() -> (Vec<u64>, Vec<u32>) {
        let adj: [&[u32]; 6] = [&[1, 3, 5], &[0, 2], &[1, 3], &[0, 2, 4], &[3, 5], &[0, 4]];
        let mut offsets = vec![0u64];
        let mut indices = Vec::new();
        for row in adj {
            indices.extend_from_slice(row);
            offsets.push(indices.len() as u64);
        }
        (offsets, indices)
    }

    #[test]
    fn targets_leave_the_message_passing_structure_both_ways() {
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        for step in 0..50 {
            let mut sub = induce(g, (0..6).collect()).unwrap();
            let cfg = LinkSampling {
                fraction: 0.5,
                exclude_targets: true,
                ..LinkSampling::default()
            };
            attach_targets(&mut sub, g, &cfg, 7, step, None);
            let b = sub.link.clone().unwrap();
            for t in 0..b.positives {
                let (u, v) = (b.src[t], b.dst[t]);
                assert!(
                    g.neighbors(u).contains(&v),
                    "a target is an edge of the graph"
                );
                assert!(
                    !sub.neighbors(u as usize).contains(&v),
                    "step {step}: ({u},{v}) kept"
                );
                assert!(
                    !sub.neighbors(v as usize).contains(&u),
                    "step {step}: ({v},{u}) kept"
                );
            }
            // Every other edge stays, with its parent entry.
            let kept: usize = sub.n_entries();
            assert_eq!(kept + 2 * b.positives, g.n_entries(), "step {step}");
            for r in 0..6 {
                for k in sub.offsets[r] as usize..sub.offsets[r + 1] as usize {
                    let e = sub.parent_entries[k] as usize;
                    assert_eq!(i[e], sub.indices[k]);
                    assert!(o[r] as usize <= e && e < o[r + 1] as usize);
                }
            }
            assert_eq!(b.len(), 2 * b.positives);
        }
    }

    #[test]
    fn without_exclusion_the_structure_is_untouched_and_every_edge_is_a_target_at_fraction_one() {
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        let mut sub = induce(g, (0..6).collect()).unwrap();
        let before = sub.clone();
        let cfg = LinkSampling {
            negatives: 3,
            ..LinkSampling::default()
        };
        attach_targets(&mut sub, g, &cfg, 1, 0, None);
        let b = sub.link.take().unwrap();
        assert_eq!(sub, before);
        assert_eq!(b.positives, 7);
        assert_eq!(b.len(), 7 * 4);
        for t in 0..7 {
            for j in 0..3 {
                assert_eq!(
                    b.src[7 + t * 3 + j],
                    b.src[t],
                    "negatives share their source"
                );
            }
        }
        let total: f32 = b.weights.iter().sum();
        assert!(
            (total - 2.0).abs() < 1e-5,
            "positives and negatives weigh 1 each: {total}"
        );
    }

    #[test]
    fn both_ends_draw_sources_and_tails_uniformly_and_independently() {
        // 6 nodes, uniform: each of the 36 (source, tail) pairs has probability 1/36,
        // whatever the target; chi-square over 36 cells (df 35, p = 0.001: 66.6).
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        let cfg = LinkSampling {
            negatives: 4,
            ends: NegativeEnds::Both,
            ..LinkSampling::default()
        };
        let mut cells = [0u64; 36];
        let mut same_source = 0u64;
        for step in 0..400 {
            let mut sub = induce(g, (0..6).collect()).unwrap();
            attach_targets(&mut sub, g, &cfg, 5, step, None);
            let b = sub.link.take().unwrap();
            for t in 0..b.positives {
                for j in 0..b.k {
                    let q = b.positives + t * b.k + j;
                    cells[(b.src[q] * 6 + b.dst[q]) as usize] += 1;
                    same_source += u64::from(b.src[q] == b.src[t]);
                }
            }
        }
        let n: u64 = cells.iter().sum();
        let e = n as f64 / 36.0;
        let chi: f64 = cells.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi < 66.6, "chi-square {chi} over {cells:?}");
        // The source is drawn, not kept: it matches the target's 1 time in 6.
        let share = same_source as f64 / n as f64;
        assert!((share - 1.0 / 6.0).abs() < 0.03, "{share}");
    }

    #[test]
    fn exclude_true_draws_no_true_edge_when_there_is_room() {
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        for dist in [
            NegativeDist::Uniform,
            NegativeDist::Degree,
            NegativeDist::InBatch,
        ] {
            let mut hits = 0;
            for step in 0..200 {
                let mut sub = induce(g, (0..6).collect()).unwrap();
                let cfg = LinkSampling {
                    negatives: 2,
                    dist,
                    exclude_true: true,
                    ..LinkSampling::default()
                };
                attach_targets(&mut sub, g, &cfg, 3, step, None);
                let b = sub.link.unwrap();
                for q in b.positives..b.len() {
                    let (u, w) = (b.src[q], b.dst[q]);
                    if u == w || g.neighbors(u).contains(&w) {
                        hits += 1;
                    }
                }
            }
            // Uniform: a true edge or self pair has probability ≥ 1/2 per draw; 33 misses in
            // a row is < 2^-33.
            assert_eq!(hits, 0, "{dist:?}");
        }
    }

    #[test]
    fn negatives_follow_their_stated_distributions() {
        // Chi-square of the tails over the 6 nodes, 7000 draws, 5 degrees of freedom: the
        // 0.001 critical value is 20.5. Uniform: every node alike; degree: ∝ deg^0.75 (nodes
        // 0 and 3 have degree 3, the others 2).
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        for (dist, power) in [(NegativeDist::Uniform, 0.0), (NegativeDist::Degree, 0.75)] {
            let mut counts = [0f64; 6];
            for step in 0..1000 {
                let mut sub = induce(g, (0..6).collect()).unwrap();
                let cfg = LinkSampling {
                    dist,
                    ..LinkSampling::default()
                };
                attach_targets(&mut sub, g, &cfg, 9, step, None);
                let b = sub.link.unwrap();
                for q in b.positives..b.len() {
                    counts[b.dst[q] as usize] += 1.0;
                }
            }
            let total: f64 = counts.iter().sum();
            let w: Vec<f64> = (0..6).map(|v| (g.degree(v) as f64).powf(power)).collect();
            let ws: f64 = w.iter().sum();
            let chi: f64 = (0..6)
                .map(|v| {
                    let e = total * w[v] / ws;
                    (counts[v] - e).powi(2) / e
                })
                .sum();
            assert!(chi < 20.5, "{dist:?}: chi-square {chi} over {counts:?}");
        }
    }

    #[test]
    fn a_batch_depends_only_on_seed_and_step() {
        let (o, i) = graph();
        let g = Csr::new(&o, &i).unwrap();
        let cfg = LinkSampling {
            fraction: 0.5,
            negatives: 2,
            exclude_targets: true,
            ..LinkSampling::default()
        };
        let draw = |seed, step| {
            let mut sub = induce(g, (0..6).collect()).unwrap();
            attach_targets(&mut sub, g, &cfg, seed, step, None);
            sub
        };
        assert_eq!(draw(5, 3), draw(5, 3));
        assert!((0..20).any(|s| draw(5, s) != draw(5, 3)));
    }
}
