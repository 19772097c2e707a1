//! Scoring a link split (`saintflow eval-link`): any pair scorer — a heuristic, an
//! embedding's dot product, later a trained decoder — against the set's fixed negatives.
//!
//! For a set of E positives, each with K tail negatives and one negative pair:
//!
//! * AUC and AP: the E positives against the E negative pairs (GAE's protocol, Kipf &
//!   Welling 2016: one random non-edge per positive);
//! * MRR and Hits@K: each positive against its own K tail negatives (ogbl-citation2's);
//! * Hits@K against the pool: the E positives against the E negative pairs as one pool
//!   (ogbl-collab's definition; the pool is E pairs, not collab's 100,000).
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
    /// Negative pairs, one per positive (AUC, AP, `hits_pool`).
    pub negative_pairs: usize,
    /// AUC of the positives against the negative pairs.
    pub auc: f64,
    /// Average precision of the positives against the negative pairs.
    pub ap: f64,
    /// MRR of each positive against its K tail negatives.
    pub mrr: f64,
    /// `(K, Hits@K)` of each positive against its K tail negatives.
    pub hits: Vec<(usize, f64)>,
    /// `(K, Hits@K)` of the positives against the pool of negative pairs.
    pub hits_pool: Vec<(usize, f64)>,
    /// Wall time of the scoring, seconds.
    pub seconds: f64,
}

/// Scores set `edges` with `score` (a pair's score; higher = more likely an edge) and
/// computes every metric with the Hits cut-offs `ks`. An empty set is an error.
pub fn evaluate(
    method: &str,
    edges: LinkEdges<'_>,
    score: &(dyn Fn(u32, u32) -> Result<f64, StoreError> + Sync),
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
            .map(|p| score(p[0], p[1]))
            .collect()
    };
    let pos = pairs(edges.positives())?;
    let neg = pairs(edges.negative_pairs())?;
    let ranks: Vec<f64> = (0..edges.len())
        .into_par_iter()
        .map(|i| {
            let (u, _) = edges.pos(i);
            let tails = edges.checked_tails(i)?;
            let s: Vec<f64> = tails
                .iter()
                .map(|&t| score(u, t))
                .collect::<Result<_, _>>()?;
            Ok(rank(pos[i], s))
        })
        .collect::<Result<_, StoreError>>()?;
    let none = || StoreError::argument("no positives or no negatives to score");
    let ranked = RankMetrics::from_ranks(&ranks, ks).ok_or_else(none)?;
    let hits_pool = ks
        .iter()
        .map(|&k| {
            hits_against_pool(&pos, &neg, k)
                .map(|h| (k, h))
                .ok_or_else(none)
        })
        .collect::<Result<_, _>>()?;
    Ok(LinkScores {
        method: method.to_string(),
        positives: edges.len(),
        negatives_per_positive: edges.k(),
        negative_pairs: neg.len(),
        auc: auc(&pos, &neg).ok_or_else(none)?,
        ap: average_precision(&pos, &neg).ok_or_else(none)?,
        mrr: ranked.mrr,
        hits: ranked.hits,
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
        format!(
            "{}: {} positives, {:.3} s\n  AUC {:.4}, AP {:.4} (against {} negative pairs, one per positive)\n  MRR {:.4}, {} ({} negatives per positive)\n  {} (against the pool of {} negative pairs)\n",
            self.method,
            self.positives,
            self.seconds,
            self.auc,
            self.ap,
            self.negative_pairs,
            self.mrr,
            hits(&self.hits),
            self.negatives_per_positive,
            hits(&self.hits_pool),
            self.negative_pairs
        )
    }
}
