//! Walker's alias method (Vose's construction): O(n) build, O(1) draw from a discrete
//! distribution given by non-negative weights.

use rand_core::RngCore;

use crate::sample::scale;

/// An alias table over `0..n`.
#[derive(Debug, Clone)]
pub struct AliasTable {
    /// Per column i: the probability of keeping i and the other outcome, side by side so a
    /// draw reads one cache line.
    columns: Vec<Column>,
}

#[derive(Debug, Clone, Copy)]
struct Column {
    /// Probability of keeping the column (scaled to [0, 1]).
    prob: f64,
    /// The other outcome.
    alias: u32,
}

impl AliasTable {
    /// Builds the table; `None` if there are no weights, a weight is negative or not
    /// finite, or all are zero.
    pub fn new(weights: &[f64]) -> Option<Self> {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        if n == 0
            || n > u32::MAX as usize
            || !(total.is_finite() && total > 0.0)
            || weights.iter().any(|&w| w.is_nan() || w < 0.0)
        {
            return None;
        }
        let mut prob: Vec<f64> = weights.iter().map(|&w| w * n as f64 / total).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<u32>, Vec<u32>) =
            (0..n as u32).partition(|&i| prob[i as usize] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s as usize] = l;
            prob[l as usize] -= 1.0 - prob[s as usize];
            if prob[l as usize] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Leftovers are 1 up to rounding.
        for i in large.into_iter().chain(small) {
            prob[i as usize] = 1.0;
        }
        let columns = prob
            .into_iter()
            .zip(alias)
            .map(|(prob, alias)| Column { prob, alias })
            .collect();
        Some(AliasTable { columns })
    }

    /// Number of outcomes.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether the table is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The columns: per outcome i, the probability of keeping i (in [0, 1]) and the other
    /// outcome (for a device that draws with its own bits: `embedding::device`).
    pub fn columns(&self) -> impl Iterator<Item = (f64, u32)> + '_ {
        self.columns.iter().map(|c| (c.prob, c.alias))
    }

    /// One draw.
    #[inline]
    pub fn sample(&self, rng: &mut impl RngCore) -> usize {
        let x = rng.next_u64();
        self.pick(x, rng.next_u64())
    }

    /// The outcome [`AliasTable::sample`] makes of its two random numbers, `x` (the column,
    /// [`below`](crate::sample::below)'s) then `y` (the coin), for callers that draw them ahead.
    #[inline]
    pub fn pick(&self, x: u64, y: u64) -> usize {
        let i = scale(x, self.columns.len() as u64) as usize;
        let u = (y >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let c = self.columns[i];
        // Which way a draw goes is a coin toss: a conditional move, not a branch the CPU
        // mispredicts (a third of the negative sampling's time as a branch).
        std::hint::select_unpredictable(u < c.prob, i, c.alias as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn frequencies_match_weights() {
        let w = [1.0, 0.0, 3.0, 0.5, 5.5, 2.0];
        let t = AliasTable::new(&w).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let draws = 600_000;
        let mut c = [0u64; 6];
        for _ in 0..draws {
            c[t.sample(&mut rng)] += 1;
        }
        let total: f64 = w.iter().sum();
        let expected: Vec<f64> = w.iter().map(|x| x / total * draws as f64).collect();
        assert_eq!(c[1], 0, "zero-weight outcome drawn");
        let stat = crate::sample::naive::chi_square(&c, &expected);
        assert!(
            stat < crate::sample::naive::chi_square_critical(4),
            "chi2 {stat}: {c:?}"
        );
    }

    #[test]
    fn rejects_bad_weights() {
        assert!(AliasTable::new(&[]).is_none());
        assert!(AliasTable::new(&[0.0, 0.0]).is_none());
        assert!(AliasTable::new(&[1.0, -1.0]).is_none());
        assert!(AliasTable::new(&[1.0, f64::NAN]).is_none());
    }
}
