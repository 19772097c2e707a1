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

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use crate::store::format::{Role, SectionId, TrainGraph};
use crate::store::mmap::{GraphStore, SMALL_SECTIONS};
use crate::store::scan::{
    asymmetric_entries, contains, entries_not_in, find_entries, find_rows, Found,
};
use crate::store::StoreError;

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

impl GraphStore {
    /// Opens the store and runs every check of [`check`] (one pass over all bytes plus
    /// the symmetry searches): for callers that want a corrupt store refused up front,
    /// whatever the damage. (Here, not in `mmap.rs`: the check is above the store's
    /// opening, issue 54 item 6.)
    pub fn open_verified(dir: impl AsRef<std::path::Path>) -> Result<Self, StoreError> {
        let store = Self::open(dir)?;
        check(&store)?;
        Ok(store)
    }
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
