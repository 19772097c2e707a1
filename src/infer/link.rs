//! A link plan's evaluation (issue 52): the full-graph node representations z (the plan's
//! `[output]`, computed as for node classification: in memory or blocked), then the
//! decoder's score of each stored pair of a set of the store's split, ranked by
//! [`crate::link::evaluate`] against the split's fixed negatives.
//!
//! [`PairScorer`] is the decoder outside the IR: the same arithmetic as the training
//! step's `pair_dot` / `pair_mul` and products (a test holds the two equal), per pair, in
//! f32 with an f64 result.

use crate::ir::{Params, Tensor};
use crate::link::{evaluate, ScorePairs};
use crate::metrics::{LinkMetrics, Metrics, LINK_HITS, LINK_POOL_HITS};
use crate::plan::Decoder;
use crate::store::{GraphStore, LinkSet, StoreError};

use super::{InferError, Result};

/// A trained decoder over node representations (`rows` × `cols`, row-major: a tensor in
/// memory or a mapped scratch file).
pub struct PairScorer<'a> {
    z: &'a [f32],
    rows: usize,
    cols: usize,
    decoder: Decoder,
    /// DistMult's r, or the MLP's (W1, b1, W2, b2).
    weights: Vec<&'a Tensor>,
}

impl<'a> PairScorer<'a> {
    /// The decoder over `z` with its parameters from `params` (names as lowering declares
    /// them).
    pub fn new(z: &'a Tensor, decoder: Decoder, params: &'a Params) -> Result<PairScorer<'a>> {
        Self::over(&z.data, z.cols, decoder, params)
    }

    /// [`PairScorer::new`] over row-major representations `z` of `cols` columns.
    pub fn over(
        z: &'a [f32],
        cols: usize,
        decoder: Decoder,
        params: &'a Params,
    ) -> Result<PairScorer<'a>> {
        if cols == 0 || !z.len().is_multiple_of(cols) {
            return Err(InferError::Run(format!(
                "node representations of {} values are not rows of {cols}",
                z.len()
            )));
        }
        let names: &[&str] = match decoder {
            Decoder::Dot => &[],
            Decoder::DistMult => &["decoder.r"],
            Decoder::Mlp { .. } => &["decoder.W1", "decoder.b1", "decoder.W2", "decoder.b2"],
        };
        let weights = names
            .iter()
            .map(|n| {
                params.get(n).ok_or_else(|| {
                    InferError::Run(format!(
                        "the {} decoder's parameter `{n}` is missing",
                        decoder.name()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let d = cols;
        let bad = |what: String| Err(InferError::Run(format!("decoder parameters: {what}")));
        match (decoder, weights.as_slice()) {
            (Decoder::DistMult, [r]) if r.rows != d || r.cols != 1 => {
                return bad(format!("decoder.r is {}×{}, expected {d}×1", r.rows, r.cols))
            }
            (Decoder::Mlp { .. }, [w1, b1, w2, b2])
                if w1.rows != d
                    || b1.rows != 1
                    || b1.cols != w1.cols
                    || w2.rows != w1.cols
                    || w2.cols != 1
                    || b2.data.len() != 1 =>
            {
                return bad(format!(
                    "the mlp decoder's shapes W1 {}×{}, b1 {}×{}, W2 {}×{}, b2 {}×{} do not fit representations of width {d}",
                    w1.rows, w1.cols, b1.rows, b1.cols, w2.rows, w2.cols, b2.rows, b2.cols
                ))
            }
            _ => {}
        }
        Ok(PairScorer {
            z,
            rows: z.len() / cols,
            cols,
            decoder,
            weights,
        })
    }

    /// Node `x`'s representation, the id checked against the rows.
    fn row(&self, x: u32) -> std::result::Result<&'a [f32], StoreError> {
        let d = self.cols;
        self.z
            .get(x as usize * d..(x as usize + 1) * d)
            .ok_or_else(|| {
                StoreError::argument(format!(
                    "pair node {x} is outside the {} nodes scored",
                    self.rows
                ))
            })
    }

    /// The score of pair (u, v); ids checked against the representations' rows.
    pub fn score(&self, u: u32, v: u32) -> std::result::Result<f64, StoreError> {
        let d = self.cols;
        let (zu, zv) = (self.row(u)?, self.row(v)?);
        Ok(match (self.decoder, self.weights.as_slice()) {
            (Decoder::Dot, _) => f64::from(zu.iter().zip(zv).map(|(a, b)| a * b).sum::<f32>()),
            (Decoder::DistMult, [r]) => f64::from(
                zu.iter()
                    .zip(zv)
                    .zip(&r.data)
                    .map(|((a, b), r)| a * b * r)
                    .sum::<f32>(),
            ),
            (Decoder::Mlp { .. }, [w1, b1, w2, b2]) => {
                let hidden = w1.cols;
                let mut h = b1.data.clone();
                for k in 0..d {
                    let m = zu[k] * zv[k];
                    let wk = &w1.data[k * hidden..(k + 1) * hidden];
                    h.iter_mut().zip(wk).for_each(|(h, w)| *h += m * w);
                }
                let s: f32 = h.iter().zip(&w2.data).map(|(h, w)| h.max(0.0) * w).sum();
                f64::from(s + b2.data[0])
            }
            _ => unreachable!("weights checked in new"),
        })
    }
}

impl ScorePairs for PairScorer<'_> {
    fn score(&self, u: u32, v: u32) -> std::result::Result<f64, StoreError> {
        PairScorer::score(self, u, v)
    }

    /// The MLP decoder batched: the K rows z_u ⊙ z_t in one product with W1 (the
    /// per-pair form is a matrix-vector product per tail, K times the passes over W1).
    fn score_tails(&self, u: u32, tails: &[u32]) -> std::result::Result<Vec<f64>, StoreError> {
        let (Decoder::Mlp { .. }, [w1, b1, w2, b2]) = (self.decoder, self.weights.as_slice())
        else {
            return tails
                .iter()
                .map(|&t| PairScorer::score(self, u, t))
                .collect();
        };
        let (d, hidden, k) = (self.cols, w1.cols, tails.len());
        let zu = self.row(u)?;
        let mut m = Vec::with_capacity(k * d);
        for &t in tails {
            m.extend(zu.iter().zip(self.row(t)?).map(|(a, b)| a * b));
        }
        let mut h = vec![0f32; k * hidden];
        saintflow_ops::gemm::gemm_nn(k, d, hidden, &m, &w1.data, &mut h, false)
            .map_err(|e| StoreError::argument(format!("the mlp decoder's product: {e}")))?;
        Ok(h.chunks_exact(hidden)
            .map(|r| {
                let s: f32 = r
                    .iter()
                    .zip(&b1.data)
                    .zip(&w2.data)
                    .map(|((h, b), w)| (h + b).max(0.0) * w)
                    .sum();
                f64::from(s + b2.data[0])
            })
            .collect())
    }
}

/// The figures of `set` of `store`'s split under `scorer`; None when the set holds no
/// positive. Accuracy and F1 are those of the pairs (positives and negative pairs) classified
/// at σ(score) > ½.
pub fn link_metrics(
    store: &GraphStore,
    scorer: &PairScorer<'_>,
    set: LinkSet,
) -> Result<Option<Metrics>> {
    let split = store.link_split().ok_or_else(|| no_split(store))?;
    let edges = split.set(set);
    if edges.is_empty() {
        return Ok(None);
    }
    let ks: Vec<usize> = LINK_HITS.iter().chain(&LINK_POOL_HITS).copied().collect();
    let mut scores = evaluate("decoder", edges, scorer, &ks)?;
    scores.hits.retain(|(k, _)| LINK_HITS.contains(k));
    scores.hits_pool.retain(|(k, _)| LINK_POOL_HITS.contains(k));
    // The pairs' classification at score 0.
    let (mut tp, mut fp, mut tn, mut fn_) = (0u64, 0u64, 0u64, 0u64);
    let flat = |f: &[u32], pos: bool, tp: &mut u64, fp: &mut u64, tn: &mut u64, fn_: &mut u64| {
        for p in f.chunks_exact(2) {
            let s = scorer.score(p[0], p[1]).unwrap_or(f64::NAN);
            match (s > 0.0, pos) {
                (true, true) => *tp += 1,
                (true, false) => *fp += 1,
                (false, false) => *tn += 1,
                (false, true) => *fn_ += 1,
            }
        }
    };
    flat(edges.positives(), true, &mut tp, &mut fp, &mut tn, &mut fn_);
    flat(
        edges.negative_pairs(),
        false,
        &mut tp,
        &mut fp,
        &mut tn,
        &mut fn_,
    );
    let f1 = |tp: u64, fp: u64, fn_: u64| match 2 * tp + fp + fn_ {
        0 => 0.0,
        d => 2.0 * tp as f64 / d as f64,
    };
    let (edge, non_edge) = (f1(tp, fp, fn_), f1(tn, fn_, fp));
    let total = (tp + fp + tn + fn_).max(1) as f64;
    Ok(Some(Metrics {
        accuracy: (tp + tn) as f64 / total,
        f1_micro: edge,
        f1_macro: (edge + non_edge) / 2.0,
        link: Some(
            LinkMetrics {
                auc: scores.auc,
                ap: scores.ap,
                mrr: scores.mrr,
                negatives: scores.negatives_per_positive as u32,
                negative_pairs: scores.negative_pairs as u64,
                positives: scores.positives as u64,
                ..LinkMetrics::default()
            }
            .with_hits(&scores.hits, &scores.hits_pool),
        ),
        loss: None,
        roc_auc: None,
    }))
}

/// The error of a link plan on a store without a split.
pub fn no_split(store: &GraphStore) -> InferError {
    InferError::Run(format!(
        "{}: a link plan needs the store's link split (held-out validation and test edges with their fixed negatives), and the store has none: make one with `saintflow split-edges {} -o SPLIT.sf --val 0.05 --test 0.1`",
        store.path().display(),
        store.path().display()
    ))
}

/// z of every node up to this many bytes is collected in memory; larger, it is written to
/// a scratch `.npy` in [`super::InferOptions::scratch_dir`] and mapped (its pages the
/// kernel's to drop: a link plan evaluates out of core like a node plan).
pub const IN_MEMORY_Z_BYTES: usize = 256 << 20;

/// Every node's representation z, in memory or mapped from a scratch file.
pub enum Representations {
    /// Collected in memory.
    Memory(Tensor),
    /// Written block by block to a scratch file (already unlinked) and mapped.
    Mapped(crate::npy::MappedF32),
}

impl Representations {
    /// The values, row-major.
    pub fn values(&self) -> &[f32] {
        match self {
            Representations::Memory(t) => &t.data,
            Representations::Mapped(m) => m.as_slice(),
        }
    }

    /// Columns d.
    pub fn cols(&self) -> usize {
        match self {
            Representations::Memory(t) => t.cols,
            Representations::Mapped(m) => m.cols(),
        }
    }
}

/// z of every node of `graph`'s store (the link plan's `logits`), in memory up to
/// [`IN_MEMORY_Z_BYTES`], else through a scratch file.
pub fn representations(
    graph: &super::FullGraph<'_>,
    runner: &dyn crate::exec::StepRunner,
    params: &Params,
) -> Result<Representations> {
    representations_within(graph, runner, params, IN_MEMORY_Z_BYTES)
}

/// [`representations`], in memory up to `in_memory` bytes.
pub fn representations_within(
    graph: &super::FullGraph<'_>,
    runner: &dyn crate::exec::StepRunner,
    params: &Params,
    in_memory: usize,
) -> Result<Representations> {
    let which = super::Output::Logits;
    let bytes = graph
        .store
        .n_nodes()
        .saturating_mul(graph.width(which))
        .saturating_mul(4);
    if bytes <= in_memory {
        return Ok(Representations::Memory(graph.logits(runner, params)?));
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = graph
        .opts
        .scratch_dir
        .join(format!(".saintflow-link-z-{}-{n}.npy", std::process::id()));
    graph.write_output(runner, params, which, &path)?;
    let mapped = crate::npy::MappedF32::open(&path);
    // The map keeps the pages; the name goes at once (nothing is left behind on any exit).
    let _ = std::fs::remove_file(&path);
    let mapped = mapped?;
    // Pairs read z's rows in no order; and what the pass freed goes back to the system, so
    // the page cache holds as much of z as the memory allows.
    mapped.advise_random();
    crate::machine::release_free_memory();
    Ok(Representations::Mapped(mapped))
}
