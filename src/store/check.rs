//! Full verification of a store (`saintflow check`): checksums of the large sections, every
//! CSR index in range, rows strictly increasing, no self loops, symmetry, the training
//! graph against the full graph and the roles, finite features, and a link split's sections
//! (`store::link::check_full`). What `GraphStore::open`
//! verified (the O(N) sections: offsets, roles, labels and their checksums) a store that
//! exists has passed, so it is not repeated here.
//!
//! Cost: one sequential pass over the large sections for the checksums, O(nnz) sequential
//! passes for symmetry (hash sums; the O(nnz · log d) binary searches only where they
//! disagree, to list the entries) and O(nnz · log d) searches between the training and the
//! full graph, in parallel over row blocks.

use std::ops::Range;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use crate::store::format::{Role, SectionId, TrainGraph};
use crate::store::mmap::{Csr, GraphStore, SMALL_SECTIONS};
use crate::store::StoreError;

/// Problems listed per kind of check before the rest are only counted.
const SAMPLES_PER_CHECK: usize = 5;
/// Rows per parallel block.
const BLOCK_ROWS: usize = 1 << 14;

/// Entries of a CSR that satisfy a predicate: how many, and the first few (in row order).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// Number of entries found.
    pub count: u64,
    /// The first entries found, in row order, at most a few.
    pub first: Vec<(u32, u32)>,
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
                        f.count += 1;
                        if f.first.len() < SAMPLES_PER_CHECK {
                            f.first.push((u as u32, v));
                        }
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
                    f.count += 1;
                    if f.first.len() < SAMPLES_PER_CHECK {
                        f.first.push((u as u32, 0));
                    }
                }
            }
            f
        })
        .reduce(Found::default, merge)
}

fn merge(mut a: Found, b: Found) -> Found {
    a.count += b.count;
    let room = SAMPLES_PER_CHECK.saturating_sub(a.first.len());
    a.first.extend(b.first.into_iter().take(room));
    a
}

fn blocks(n: usize) -> Vec<Range<usize>> {
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
                        let pair = (u64::from(s) << 32) | u64::from(t);
                        a = a.wrapping_add(mix64(pair ^ 0x243f_6a88_85a3_08d3));
                        b = b.wrapping_add(mix64(pair ^ 0x1319_8a2e_0370_7344));
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

fn describe_entries(found: &Found) -> String {
    let list: Vec<String> = found
        .first
        .iter()
        .map(|(u, v)| format!("({u}, {v})"))
        .collect();
    format!("{} entries, first: {}", found.count, list.join(", "))
}

fn describe_rows(found: &Found) -> String {
    let list: Vec<String> = found.first.iter().map(|(u, _)| u.to_string()).collect();
    format!("{} rows, first: {}", found.count, list.join(", "))
}

/// Runs every check; `Ok` if the store is valid, else every problem found.
pub fn check(store: &GraphStore) -> Result<(), StoreError> {
    let mut problems: Vec<String> = Vec::new();
    let mut report = |id: SectionId, what: String| {
        problems.push(format!(
            "{}: section {}: {what}",
            store.section_path(id).display(),
            id.name()
        ))
    };

    // Checksums, one section per task; `open` has verified those of the small sections.
    let sums: Vec<(SectionId, String)> = SectionId::ALL
        .par_iter()
        .filter(|id| !SMALL_SECTIONS.contains(id))
        .map(|&id| (id, format!("{:016x}", xxh3_64(store.section_bytes(id)))))
        .collect();
    for (id, got) in sums {
        let want = &store.header().section(id).xxh3;
        if *want != got {
            report(id, format!("checksum mismatch, expected {want}, got {got}"));
        }
    }

    let n = store.n_nodes() as u64;
    let graphs = [
        (store.full(), SectionId::FullIndices),
        (store.train(), SectionId::TrainIndices),
    ];
    let mut structure_ok = [true, true];
    for (i, &(csr, sec)) in graphs.iter().enumerate() {
        let out_of_range = find_entries(csr, |_, v| u64::from(v) >= n);
        if out_of_range.count > 0 {
            report(
                sec,
                format!(
                    "index out of range (expected < N = {n}): {}",
                    describe_entries(&out_of_range)
                ),
            );
            structure_ok[i] = false;
        }
        let unsorted = find_rows(csr.n_nodes(), |u| {
            csr.neighbors(u).windows(2).any(|w| w[0] >= w[1])
        });
        if unsorted.count > 0 {
            report(
                sec,
                format!(
                    "rows not strictly increasing (unsorted or duplicate entries): {}",
                    describe_rows(&unsorted)
                ),
            );
            structure_ok[i] = false;
        }
        let loops = find_entries(csr, |u, v| u == v);
        if loops.count > 0 {
            report(sec, format!("self loops: {}", describe_entries(&loops)));
        }
        if structure_ok[i] {
            let asym = asymmetric_entries(csr);
            if asym.count > 0 {
                report(
                    sec,
                    format!(
                        "not symmetric, reverse missing for {}",
                        describe_entries(&asym)
                    ),
                );
            }
        }
    }

    if structure_ok == [true, true] {
        let (full, train) = (store.full(), store.train());
        let extra = entries_not_in(train, full);
        if extra.count > 0 {
            report(
                SectionId::TrainIndices,
                format!(
                    "training graph has edges absent from the full graph: {}",
                    describe_entries(&extra)
                ),
            );
        }
        if store.header().train_graph == TrainGraph::Induced {
            let is_train = |v: u32| store.role(v) == Role::Train;
            let outside = find_entries(train, |u, v| !(is_train(u) && is_train(v)));
            if outside.count > 0 {
                report(
                    SectionId::TrainIndices,
                    format!(
                        "induced training graph has edges touching non-training nodes: {}",
                        describe_entries(&outside)
                    ),
                );
            }
            let missing = find_entries(full, |u, v| {
                is_train(u) && is_train(v) && !contains(train, u, v)
            });
            if missing.count > 0 {
                report(
                    SectionId::TrainIndices,
                    format!(
                        "induced training graph misses full-graph edges between training nodes: {}",
                        describe_entries(&missing)
                    ),
                );
            }
        }
    }

    let f = store.n_features();
    if f > 0 {
        let feats = store.features();
        let bad = find_rows(store.n_nodes(), |v| {
            feats[v as usize * f..(v as usize + 1) * f]
                .iter()
                .any(|x| !x.is_finite())
        });
        if bad.count > 0 {
            report(
                SectionId::Features,
                format!("non-finite values (NaN or ±inf) in {}", describe_rows(&bad)),
            );
        }
    }

    // The link split's sections (issue 52): its positives out of the graph, its negatives
    // no edges; the edge tests need the graph's rows in range and sorted.
    problems.extend(crate::store::link::check_full(
        store,
        structure_ok == [true, true],
    ));
    // The edge times: checksum, span, an edge's two entries equal, a time split's record.
    problems.extend(crate::store::time::check_times(store, structure_ok[0]));
    // A typed store's relations, per-type features and their agreement with the full
    // graph (issue 57).
    problems.extend(crate::store::typed::check_full(store, structure_ok[0]));
    StoreError::from_problems(store.path(), problems)
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
