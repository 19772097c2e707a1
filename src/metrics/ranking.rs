//! Ranking metrics of link prediction (issue 52), as the field defines them:
//!
//! * **AUC** — the probability that a positive scores above a negative, ties counting ½
//!   (Mann–Whitney U / (P·N); scikit-learn's `roc_auc_score` on {positives, negatives}).
//! * **AP** — scikit-learn's `average_precision_score`: Σₙ (Rₙ − Rₙ₋₁)·Pₙ over the distinct
//!   score thresholds from the highest down (a tie is one threshold), step-wise, no
//!   interpolation.
//! * **MRR and Hits@K against per-positive negatives** — OGB's evaluator for
//!   ogbl-citation2: positive i with score p and its negatives q₁..q_K has rank
//!   1 + ½·(#{q > p} + #{q ≥ p}) (the mean of the optimistic and pessimistic ranks, so a
//!   tie costs half a place); MRR = mean(1/rank), Hits@K = mean(rank ≤ K).
//! * **Hits@K against a global pool** — OGB's evaluator for ogbl-collab (and ddi, ppa): the
//!   fraction of positives scoring strictly above the K-th highest negative score; 1 when
//!   the pool holds fewer than K negatives.
//!
//! Scores are f64 and expected finite (NaN orders by `total_cmp`, above +∞). A metric over
//! an empty set is undefined: `None`.
//!
//! A leaf like its parent: scores in, numbers out, so `eval-link`, `eval-embedding` and
//! the training loop measure alike.

/// AUC of `pos` against `neg`: P(positive > negative) + ½·P(tie). O((P+N) log(P+N)).
pub fn auc(pos: &[f64], neg: &[f64]) -> Option<f64> {
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    let mut all: Vec<(f64, bool)> = pos
        .iter()
        .map(|&s| (s, true))
        .chain(neg.iter().map(|&s| (s, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Mann–Whitney: the sum of the positives' ranks (from 1), a tie at its mean rank.
    let (mut rank_sum, mut i) = (0f64, 0usize);
    while i < all.len() {
        let j = i + all[i..].partition_point(|e| e.0.total_cmp(&all[i].0).is_eq());
        let mean_rank = (i + j + 1) as f64 / 2.0;
        rank_sum += mean_rank * all[i..j].iter().filter(|e| e.1).count() as f64;
        i = j;
    }
    let (p, n) = (pos.len() as f64, neg.len() as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// Average precision of `pos` against `neg` (scikit-learn's definition, module comment).
pub fn average_precision(pos: &[f64], neg: &[f64]) -> Option<f64> {
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    let mut all: Vec<(f64, bool)> = pos
        .iter()
        .map(|&s| (s, true))
        .chain(neg.iter().map(|&s| (s, false)))
        .collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total = pos.len() as f64;
    let (mut tp, mut fp, mut recall, mut ap, mut i) = (0u64, 0u64, 0f64, 0f64, 0usize);
    while i < all.len() {
        let j = i + all[i..].partition_point(|e| e.0.total_cmp(&all[i].0).is_eq());
        let hits = all[i..j].iter().filter(|e| e.1).count() as u64;
        tp += hits;
        fp += (j - i) as u64 - hits;
        let r = tp as f64 / total;
        ap += (r - recall) * tp as f64 / (tp + fp) as f64;
        recall = r;
        i = j;
    }
    Some(ap)
}

/// OGB's rank of a positive scoring `pos` among negatives scoring `neg`:
/// 1 + ½·(#{q > pos} + #{q ≥ pos}).
pub fn rank(pos: f64, neg: impl IntoIterator<Item = f64>) -> f64 {
    let (mut above, mut at_least) = (0u64, 0u64);
    for q in neg {
        above += u64::from(q.total_cmp(&pos).is_gt());
        at_least += u64::from(q.total_cmp(&pos).is_ge());
    }
    1.0 + 0.5 * (above + at_least) as f64
}

/// MRR and Hits@K of positives against their own negatives.
#[derive(Debug, Clone, PartialEq)]
pub struct RankMetrics {
    /// Mean reciprocal rank.
    pub mrr: f64,
    /// `(K, Hits@K)` for each K asked, in the order asked.
    pub hits: Vec<(usize, f64)>,
    /// Positives ranked.
    pub positives: usize,
}

impl RankMetrics {
    /// The metrics of the ranks of every positive ([`rank`]); `None` for no positives.
    pub fn from_ranks(ranks: &[f64], ks: &[usize]) -> Option<RankMetrics> {
        if ranks.is_empty() {
            return None;
        }
        let n = ranks.len() as f64;
        Some(RankMetrics {
            mrr: ranks.iter().map(|r| 1.0 / r).sum::<f64>() / n,
            hits: ks
                .iter()
                .map(|&k| {
                    (
                        k,
                        ranks.iter().filter(|&&r| r <= k as f64).count() as f64 / n,
                    )
                })
                .collect(),
            positives: ranks.len(),
        })
    }
}

/// MRR and Hits@K of `pos[i]` against row i of `neg` (`pos.len()` rows of `k`), as OGB
/// ranks ogbl-citation2. `None` for no positives or a `neg` of another size.
pub fn mrr_hits(pos: &[f64], neg: &[f64], k: usize, ks: &[usize]) -> Option<RankMetrics> {
    if neg.len() != pos.len().checked_mul(k)? {
        return None;
    }
    let ranks: Vec<f64> = pos
        .iter()
        .enumerate()
        .map(|(i, &p)| rank(p, neg[i * k..(i + 1) * k].iter().copied()))
        .collect();
    RankMetrics::from_ranks(&ranks, ks)
}

/// Hits@K of `pos` against one pool of negatives `neg`, as OGB's ogbl-collab evaluator: the
/// fraction of positives strictly above the K-th highest negative; 1 when the pool holds
/// fewer than K. `None` for no positives or K = 0.
pub fn hits_against_pool(pos: &[f64], neg: &[f64], k: usize) -> Option<f64> {
    if pos.is_empty() || k == 0 {
        return None;
    }
    if neg.len() < k {
        return Some(1.0);
    }
    let mut sorted = neg.to_vec();
    let (_, kth, _) = sorted.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    let kth = *kth;
    let above = pos.iter().filter(|p| p.total_cmp(&kth).is_gt()).count();
    Some(above as f64 / pos.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }

    #[test]
    fn auc_by_hand_with_ties() {
        // Pairs (p, n): 3 vs 1 ✓, 3 vs 2 ✓, 3 vs 3 ½; 1 vs 1 ½, 1 vs 2 ✗, 1 vs 3 ✗
        // → (1 + 1 + ½ + ½) / 6 = 0.5.
        close(auc(&[3.0, 1.0], &[1.0, 2.0, 3.0]).unwrap(), 0.5);
        close(auc(&[2.0, 3.0], &[0.0, 1.0]).unwrap(), 1.0);
        close(auc(&[0.0], &[1.0, 2.0]).unwrap(), 0.0);
        close(auc(&[1.0, 1.0], &[1.0]).unwrap(), 0.5);
        // 0.9 beats all 3; 0.4 beats 0.1 and ties 0.4: (3 + 1.5) / 6 = 0.75.
        close(auc(&[0.9, 0.4], &[0.1, 0.4, 0.8]).unwrap(), 0.75);
        assert_eq!(auc(&[], &[1.0]), None);
        assert_eq!(auc(&[1.0], &[]), None);
    }

    #[test]
    fn average_precision_as_scikit_learn() {
        // y = [1, 0, 1, 0], scores [0.9, 0.8, 0.7, 0.1] (descending): thresholds give
        // (P, R) = (1, ½), (½, ½), (⅔, 1), (½, 1): AP = ½·1 + 0 + ½·⅔ = 5/6.
        close(
            average_precision(&[0.9, 0.7], &[0.8, 0.1]).unwrap(),
            5.0 / 6.0,
        );
        // scikit-learn's docstring example: y = [0, 0, 1, 1], scores [0.1, 0.4, 0.35, 0.8]
        // → 0.8333…
        close(
            average_precision(&[0.35, 0.8], &[0.1, 0.4]).unwrap(),
            5.0 / 6.0,
        );
        // A tie of one positive and one negative at the top is one threshold: P = ½ at
        // R = ½; then the other positive: P = ⅔ at R = 1. AP = ½·½ + ½·⅔ = 7/12.
        close(
            average_precision(&[1.0, 0.5], &[1.0, 0.1]).unwrap(),
            7.0 / 12.0,
        );
        close(average_precision(&[2.0], &[1.0]).unwrap(), 1.0);
        assert_eq!(average_precision(&[], &[1.0]), None);
    }

    #[test]
    fn ogb_rank_counts_ties_half() {
        // Negatives above: 5; at least: 5, 3, 3 → rank 1 + ½(1 + 3) = 3.
        close(rank(3.0, [5.0, 3.0, 3.0, 1.0]), 3.0);
        close(rank(9.0, [5.0, 3.0]), 1.0);
        close(rank(0.0, [5.0, 3.0]), 3.0);
        // All tied: optimistic 1, pessimistic K + 1 → 1 + K/2.
        close(rank(1.0, [1.0; 4]), 3.0);
    }

    #[test]
    fn mrr_and_hits_per_positive_by_hand() {
        // Positive 0 scores 0.5 against [0.9, 0.5, 0.1]: rank 1 + ½(1 + 2) = 2.5.
        // Positive 1 scores 0.8 against [0.1, 0.2, 0.3]: rank 1.
        let m = mrr_hits(&[0.5, 0.8], &[0.9, 0.5, 0.1, 0.1, 0.2, 0.3], 3, &[1, 2, 3]).unwrap();
        close(m.mrr, (1.0 / 2.5 + 1.0) / 2.0);
        assert_eq!(m.hits, vec![(1, 0.5), (2, 0.5), (3, 1.0)]);
        assert_eq!(m.positives, 2);
        assert_eq!(mrr_hits(&[0.5], &[0.1], 3, &[1]), None);
        assert_eq!(mrr_hits(&[], &[], 3, &[1]), None);
    }

    #[test]
    fn hits_against_a_pool_as_ogbl_collab() {
        let neg = [0.9, 0.7, 0.5, 0.3];
        // 2nd highest negative 0.7: positives strictly above it: 0.8 and 0.95, not 0.7.
        close(
            hits_against_pool(&[0.8, 0.7, 0.95, 0.1], &neg, 2).unwrap(),
            0.5,
        );
        // 1st: 0.9; only 0.95.
        close(
            hits_against_pool(&[0.8, 0.7, 0.95, 0.1], &neg, 1).unwrap(),
            0.25,
        );
        // Fewer negatives than K: 1, as OGB.
        close(hits_against_pool(&[0.0], &neg, 5).unwrap(), 1.0);
        // A tie with the K-th is no hit.
        close(hits_against_pool(&[0.5], &neg, 3).unwrap(), 0.0);
        assert_eq!(hits_against_pool(&[], &neg, 1), None);
    }
}
