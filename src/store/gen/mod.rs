//! Synthetic graph generators. Everything random is a pure function of (seed, stream, index)
//! so that output is byte-identical for a seed whatever the thread count.

pub mod kronecker;

use crate::seed::{hash3, mix64, stream, unit_f64};
use crate::store::format::Role;

pub use kronecker::{generate_kronecker, GenReport, KroneckerSpec, Planted};

/// The role of node `v` in a random split with train/val/test probabilities `split`
/// (the rest gets no role): independent per node, a pure function of (seed, v).
pub fn random_role(seed: u64, split: [f64; 3], v: u64) -> Role {
    let r = unit_f64(hash3(seed, stream::ROLES, v));
    let [tr, va, te] = split;
    if r < tr {
        Role::Train
    } else if r < tr + va {
        Role::Val
    } else if r < tr + va + te {
        Role::Test
    } else {
        Role::None
    }
}

/// A keyed pseudo-random permutation of `0..n` for `n = 2^bits`-or-less domains: a 4-round
/// Feistel network on an even number of bits, with cycle walking down to `n`. O(1) memory,
/// so relabelling the nodes of a 2^25-node graph needs no table.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..n` keyed by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let keys = std::array::from_fn(|i| hash3(seed, stream::FEISTEL, i as u64));
        Permutation { n, half, keys }
    }

    #[inline]
    fn feistel(&self, y: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (y >> self.half, y & mask);
        for &k in &self.keys {
            let t = l ^ (mix64(r ^ k) & mask);
            l = r;
            r = t;
        }
        (l << self.half) | r
    }

    /// The image of `x < n`.
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.n);
        let mut y = self.feistel(x);
        while y >= self.n {
            y = self.feistel(y);
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection_for_odd_even_and_tiny_domains() {
        for n in [1u64, 2, 3, 5, 16, 17, 1000, 1 << 12, (1 << 13) - 3] {
            let p = Permutation::new(n, 42);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                assert!(y < n, "n={n}: {x} -> {y}");
                assert!(!seen[y as usize], "n={n}: {y} hit twice");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn permutation_depends_on_seed_and_moves_most_points() {
        let (a, b) = (Permutation::new(4096, 1), Permutation::new(4096, 2));
        let differ = (0..4096).filter(|&x| a.apply(x) != b.apply(x)).count();
        let fixed = (0..4096).filter(|&x| a.apply(x) == x).count();
        assert!(
            differ > 4000,
            "seeds give near-identical permutations: {differ}"
        );
        assert!(fixed < 20, "{fixed} fixed points: not mixing");
    }
}
