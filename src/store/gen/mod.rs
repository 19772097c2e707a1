//! Synthetic graph generators. Everything random is a pure function of (seed, stream, index)
//! so that output is byte-identical for a seed whatever the thread count.

pub mod kronecker;

use crate::seed::{hash3, mix64, stream, unit_f64};
use crate::store::format::Role;

pub use kronecker::{generate_kronecker, GenReport, KroneckerSpec, Planted, TypedGen};

/// Issue 28: the one check of random-split fractions, shared by `gen --split` and an edge
/// list's `--split`: three numbers in [0, 1] (NaN refused) summing to at most 1.
pub fn check_split(split: [f64; 3]) -> Result<(), crate::store::StoreError> {
    let s: f64 = split.iter().sum();
    if split.iter().any(|&x| !(0.0..=1.0).contains(&x)) || s > 1.0 + 1e-9 {
        return Err(crate::store::StoreError::argument(format!(
            "--split expected three fractions summing to ≤ 1, got {split:?}"
        )));
    }
    Ok(())
}

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

/// Roles of nodes `0..n` in a seeded split with *exact* train/val/test fractions `split`
/// over the nodes `eligible` says yes to (m of them; the others get none): the eligible
/// nodes, ranked in id order, are shuffled by a [`Permutation`] of `0..m` keyed by (seed,
/// roles stream), and positions below round(tr·m) are Train, below round((tr+va)·m) Val,
/// below round((tr+va+te)·m) Test (so each count is its fraction of m up to rounding, and
/// fractions summing to 1 leave no eligible node without a role). Where [`random_role`]
/// draws each node alone (counts binomial), this one is a permutation: the counts are
/// fixed. Fractions must be in [0, 1] with a sum ≤ 1 (the caller checks).
pub fn exact_split(
    seed: u64,
    split: [f64; 3],
    n: usize,
    eligible: impl Fn(usize) -> bool,
) -> Vec<u8> {
    let m = (0..n).filter(|&v| eligible(v)).count() as u64;
    let perm = Permutation::new(m, hash3(seed, stream::ROLES, u64::MAX));
    let cut = |f: f64| ((f * m as f64).round() as u64).min(m);
    let [tr, va, te] = split;
    let cuts = [cut(tr), cut(tr + va), cut(tr + va + te)];
    let mut rank = 0u64;
    (0..n)
        .map(|v| {
            if !eligible(v) {
                return Role::None as u8;
            }
            let p = perm.apply(rank);
            rank += 1;
            let role = if p < cuts[0] {
                Role::Train
            } else if p < cuts[1] {
                Role::Val
            } else if p < cuts[2] {
                Role::Test
            } else {
                Role::None
            };
            role as u8
        })
        .collect()
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
    fn exact_split_counts_are_the_fractions_of_the_eligible_nodes() {
        let eligible = |v: usize| v % 7 != 3;
        let roles = exact_split(5, [0.45, 0.18, 0.37], 2708, eligible);
        let m = (0..2708).filter(|&v| eligible(v)).count() as f64;
        let count = |r: Role| roles.iter().filter(|&&x| x == r as u8).count() as f64;
        assert_eq!(count(Role::Train), (0.45 * m).round());
        assert_eq!(count(Role::Val), (0.63 * m).round() - (0.45 * m).round());
        assert_eq!(count(Role::Test), m - (0.63 * m).round());
        assert!((0..2708).all(|v| eligible(v) || roles[v] == Role::None as u8));
        assert!((0..2708).all(|v| !eligible(v) || roles[v] != Role::None as u8));
        assert_eq!(roles, exact_split(5, [0.45, 0.18, 0.37], 2708, eligible));
        assert_ne!(roles, exact_split(6, [0.45, 0.18, 0.37], 2708, eligible));
        assert!(exact_split(1, [0.5, 0.2, 0.3], 0, |_| true).is_empty());
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
