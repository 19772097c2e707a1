//! The parallel scans behind a store's checks (issue 54 item 6: out of `check.rs`, so that
//! the sections' own checks in `link/`, `time.rs` and `typed.rs` use them without
//! importing the whole-store check that calls them): entries or rows of a CSR that satisfy
//! a predicate ([`find_entries`], [`find_rows`]: a count and the first few, in row order),
//! [`contains`] (a binary search in a sorted row), [`asymmetric_entries`] (hash sums, the
//! searches only where they disagree) and [`entries_not_in`].
//!
//! Cost: O(nnz) for a scan, in parallel over blocks of [`BLOCK_ROWS`] rows; O(log d) per
//! [`contains`].

use std::ops::Range;

use rayon::prelude::*;

use crate::store::mmap::Csr;

/// Problems listed per kind of check before the rest are only counted.
pub const SAMPLES_PER_CHECK: usize = 5;
/// Rows per parallel block.
pub const BLOCK_ROWS: usize = 1 << 14;

/// Entries of a CSR that satisfy a predicate: how many, and the first few (in row order).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Number of entries found.
    pub count: u64,
    /// The first entries found, in row order, at most a few.
    pub first: Vec<(u32, u32)>,
}

impl Found {
    /// Counts entry (or row, `v` = 0) `(u, v)`, keeping it among the first few.
    #[inline]
    pub fn note(&mut self, u: u32, v: u32) {
        self.count += 1;
        if self.first.len() < SAMPLES_PER_CHECK {
            self.first.push((u, v));
        }
    }
}

/// Finds the entries `(u, v)` of `csr` for which `pred(u, v)` holds.
pub fn find_entries(csr: Csr<'_>, pred: impl Fn(u32, u32) -> bool + Sync) -> Found {
    blocks(csr.n_nodes())
        .into_par_iter()
        .map(|rows| {
            let mut f = Found::default();
            for u in rows {
                for &v in csr.neighbors(u as u32) {
                    if pred(u as u32, v) {
                        f.note(u as u32, v);
                    }
                }
            }
            f
        })
        .reduce(Found::default, merge)
}

/// Finds the rows `u` of a graph with `n` rows for which `pred(u)` holds.
pub fn find_rows(n: usize, pred: impl Fn(u32) -> bool + Sync) -> Found {
    blocks(n)
        .into_par_iter()
        .map(|rows| {
            let mut f = Found::default();
            for u in rows {
                if pred(u as u32) {
                    f.note(u as u32, 0);
                }
            }
            f
        })
        .reduce(Found::default, merge)
}

/// `a` then `b`: counts added, the first few kept in order.
pub fn merge(mut a: Found, b: Found) -> Found {
    a.count += b.count;
    let room = SAMPLES_PER_CHECK.saturating_sub(a.first.len());
    a.first.extend(b.first.into_iter().take(room));
    a
}

/// Rows 0..n in blocks of [`BLOCK_ROWS`].
pub fn blocks(n: usize) -> Vec<Range<usize>> {
    (0..n.div_ceil(BLOCK_ROWS))
        .map(|b| b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(n))
        .collect()
}

/// Whether row `u` of `csr` (sorted) contains `v`; false for `u ≥ N`.
pub fn contains(csr: Csr<'_>, u: u32, v: u32) -> bool {
    (u as usize) < csr.n_nodes() && csr.neighbors(u).binary_search(&v).is_ok()
}

/// Entries whose reverse is missing (requires in-range ids and sorted rows).
///
/// First an O(nnz) pass with sequential reads: two 64-bit sums of a hash of every entry
/// (u, v) against the same sums of (v, u). A symmetric graph's entries are its reversed
/// entries, so the sums agree and nothing is searched; where they differ, the binary
/// search of every entry's reverse (O(nnz · log d), a cache miss per probe) finds and
/// lists them. The search was 90 % of `saintflow check`'s 3.2 CPU-seconds on a Kronecker
/// scale-20 store of 16.8 M entries, which `saintflow train` checks before training (issue
/// 53's time to accuracy); with the sums the check takes 0.38 s. An asymmetric graph whose
/// sums agree anyway needs two 64-bit collisions of a bijective mix at once, about 2⁻¹²⁸
/// (the store's section checksums are 64-bit).
pub fn asymmetric_entries(csr: Csr<'_>) -> Found {
    let sums = |reversed: bool| {
        blocks(csr.n_nodes())
            .into_par_iter()
            .map(|rows| {
                let (mut a, mut b) = (0u64, 0u64);
                for u in rows {
                    for &v in csr.neighbors(u as u32) {
                        let (s, t) = if reversed {
                            (v, u as u32)
                        } else {
                            (u as u32, v)
                        };
                        let [x, y] = entry_hashes(s, t);
                        a = a.wrapping_add(x);
                        b = b.wrapping_add(y);
                    }
                }
                (a, b)
            })
            .reduce(
                || (0, 0),
                |x, y| (x.0.wrapping_add(y.0), x.1.wrapping_add(y.1)),
            )
    };
    if sums(false) == sums(true) {
        return Found::default();
    }
    find_entries(csr, |u, v| !contains(csr, v, u))
}

/// The two hashes of entry (u, v) whose wrapping sums over a graph's entries
/// [`asymmetric_entries`] compares with the sums over the reversed entries.
#[inline]
pub fn entry_hashes(u: u32, v: u32) -> [u64; 2] {
    let pair = (u64::from(u) << 32) | u64::from(v);
    [
        mix64(pair ^ 0x243f_6a88_85a3_08d3),
        mix64(pair ^ 0x1319_8a2e_0370_7344),
    ]
}

/// splitmix64's finaliser: a bijection of u64 whose output bits each depend on every
/// input bit.
fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Entries of `sub` absent from `sup`.
pub fn entries_not_in(sub: Csr<'_>, sup: Csr<'_>) -> Found {
    find_entries(sub, |u, v| !contains(sup, u, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash sums' verdict against the binary search's on graphs that are symmetric,
    /// miss one reverse, or have the reverses' multiset equal but not the entries'.
    #[test]
    fn asymmetric_entries_agrees_with_the_search() {
        // 0–1, 0–2, 1–2 and 2–3, both directions.
        let offsets = [0u64, 2, 4, 7, 8];
        let indices = [1u32, 2, 0, 2, 0, 1, 3, 2];
        let csr = Csr::new(&offsets, &indices).unwrap();
        assert_eq!(asymmetric_entries(csr), Found::default());
        let search = |c: Csr<'_>| find_entries(c, |u, v| !contains(c, v, u));
        // (2, 3) kept, (3, 2) replaced by (3, 1): both miss their reverse.
        let indices = [1u32, 2, 0, 2, 0, 1, 3, 1];
        let csr = Csr::new(&offsets, &indices).unwrap();
        let found = asymmetric_entries(csr);
        assert_eq!(found.count, 2);
        assert_eq!(found.first, vec![(2, 3), (3, 1)]);
        assert_eq!(found, search(csr));
        // One directed edge only: 0 → 1.
        let (offsets, indices) = ([0u64, 1, 1], [1u32]);
        let csr = Csr::new(&offsets, &indices).unwrap();
        assert_eq!(asymmetric_entries(csr).first, vec![(0, 1)]);
        // Empty.
        let (offsets, indices) = ([0u64, 0, 0], [0u32; 0]);
        let csr = Csr::new(&offsets, &indices).unwrap();
        assert_eq!(asymmetric_entries(csr), Found::default());
    }
}
