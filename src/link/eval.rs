//! Scoring a link split (`saintflow eval-link`): any pair scorer — a heuristic, an
//! embedding's dot product, later a trained decoder — against the set's fixed negatives.
//!
//! For a set of E positives, each with K tail negatives, and P negative pairs (one per
//! positive from `split-edges`; OGB's own pool from `import ogb-link`):
//!
//! * AUC and AP: the E positives against the P negative pairs (GAE's protocol, Kipf &
//!   Welling 2016: one random non-edge per positive);
//! * MRR and Hits@K: each positive against its own K tail negatives (ogbl-citation2's);
//! * Hits@K against the pool: the E positives against the P negative pairs as one pool
//!   (ogbl-collab's definition: an imported collab split holds its 100,000).
//!
//! A set without tails (K = 0) has no MRR or per-positive Hits@K, one without pairs no
//! AUC, AP or pool Hits@K: those figures are `None` (JSON `null`, lists empty), never a
//! number measured against nothing.
//!
//! The definitions are [`crate::metrics::ranking`]'s. Scoring runs in parallel over the
//! positives; a row's K negatives are scored together and only the positive's rank is kept
//! (memory O(E), not O(E·K)).

use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::metrics::ranking::{auc, average_precision, hits_against_pool, rank, RankMetrics};
use crate::store::{LinkEdges, StoreError};

/// The figures of one scorer on one set; every count of negatives is stated with them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkScores {
    /// The scorer (`cn`, `aa`, `ra`, `embedding`).
    pub method: String,
    /// Positives scored E.
    pub positives: usize,
    /// Tail negatives per positive K (MRR, `hits`).
    pub negatives_per_positive: usize,
    /// Negative pairs P (AUC, AP, `hits_pool`).
    pub negative_pairs: usize,
    /// AUC of the positives against the negative pairs (None without pairs).
    pub auc: Option<f64>,
    /// Average precision of the positives against the negative pairs (None without pairs).
    pub ap: Option<f64>,
    /// MRR of each positive against its K tail negatives (None without tails).
    pub mrr: Option<f64>,
    /// `(K, Hits@K)` of each positive against its K tail negatives.
    pub hits: Vec<(usize, f64)>,
    /// `(K, Hits@K)` of the positives against the pool of negative pairs.
    pub hits_pool: Vec<(usize, f64)>,
    /// Wall time of the scoring, seconds.
    pub seconds: f64,
}

/// A pair scorer (higher = more likely an edge): pair by pair, or one source against its
/// tails at once, which a scorer with a batched form (a trained MLP decoder: one product
/// per source) overrides. Any `Fn(u32, u32) -> Result<f64, StoreError>` is one.
pub trait ScorePairs: Sync {
    /// The score of pair (u, v).
    fn score(&self, u: u32, v: u32) -> Result<f64, StoreError>;

    /// The scores of (u, t) for every t of `tails`, in order.
    fn score_tails(&self, u: u32, tails: &[u32]) -> Result<Vec<f64>, StoreError> {
        tails.iter().map(|&t| self.score(u, t)).collect()
    }
}

impl<F> ScorePairs for F
where
    F: Fn(u32, u32) -> Result<f64, StoreError> + Sync,
{
    fn score(&self, u: u32, v: u32) -> Result<f64, StoreError> {
        self(u, v)
    }
}

/// Scores set `edges` with `score` and computes every metric with the Hits cut-offs `ks`.
/// An empty set is an error.
pub fn evaluate(
    method: &str,
    edges: LinkEdges<'_>,
    score: &dyn ScorePairs,
    ks: &[usize],
) -> Result<LinkScores, StoreError> {
    let t0 = Instant::now();
    if edges.is_empty() {
        return Err(StoreError::argument(format!(
            "the {} set of the link split holds no positive (split-edges --{} 0?)",
            edges.set().name(),
            edges.set().name()
        )));
    }
    let pairs = |flat: &[u32]| -> Result<Vec<f64>, StoreError> {
        flat.par_chunks_exact(2)
            .map(|p| score.score(p[0], p[1]))
            .collect()
    };
    let pos = pairs(edges.positives())?;
    let neg = pairs(edges.negative_pairs())?;
    let k = edges.k();
    let ranks: Vec<f64> = (0..if k > 0 { edges.len() } else { 0 })
        .into_par_iter()
        .map(|i| {
            let (u, _) = edges.pos(i);
            let tails = edges.checked_tails(i)?;
            Ok(rank(pos[i], score.score_tails(u, tails)?))
        })
        .collect::<Result<_, StoreError>>()?;
    let ranked = RankMetrics::from_ranks(&ranks, ks);
    // An empty pool would read as Hits@K = 1 (fewer than K negatives): not measured.
    let hits_pool = ks
        .iter()
        .filter(|_| !neg.is_empty())
        .filter_map(|&k| hits_against_pool(&pos, &neg, k).map(|h| (k, h)))
        .collect();
    Ok(LinkScores {
        method: method.to_string(),
        positives: edges.len(),
        negatives_per_positive: k,
        negative_pairs: neg.len(),
        auc: auc(&pos, &neg),
        ap: average_precision(&pos, &neg),
        mrr: ranked.as_ref().map(|r| r.mrr),
        hits: ranked.map(|r| r.hits).unwrap_or_default(),
        hits_pool,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

impl LinkScores {
    /// The figures as text, each naming the negatives it was measured against.
    pub fn to_text(&self) -> String {
        let hits = |v: &[(usize, f64)]| {
            v.iter()
                .map(|(k, h)| format!("Hits@{k} {h:.4}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut s = format!(
            "{}: {} positives, {:.3} s\n",
            self.method, self.positives, self.seconds
        );
        match (self.auc, self.ap) {
            (Some(auc), Some(ap)) => s.push_str(&format!(
                "  AUC {auc:.4}, AP {ap:.4} (against {} negative pairs{})\n  {} (against the pool of {} negative pairs)\n",
                self.negative_pairs,
                if self.negative_pairs == self.positives { ", one per positive" } else { "" },
                hits(&self.hits_pool),
                self.negative_pairs
            )),
            _ => s.push_str("  no negative pairs: AUC, AP and pool Hits@K not measured\n"),
        }
        match self.mrr {
            Some(mrr) => s.push_str(&format!(
                "  MRR {mrr:.4}, {} ({} negatives per positive)\n",
                hits(&self.hits),
                self.negatives_per_positive
            )),
            None => s.push_str("  no tail negatives: MRR and Hits@K per positive not measured\n"),
        }
        s
    }
}
