//! Full verification of a store (`saintflow check`): checksums of the large sections, every
//! CSR index in range, rows strictly increasing, no self loops, symmetry, the training
//! graph against the full graph and the roles, finite features, and a link split's sections
//! (`store::link::check_full`). What `GraphStore::open`
//! verified (the O(N) sections: offsets, roles, labels and their checksums) a store that
//! exists has passed, so it is not repeated here.
//!
//! Cost: one sequential pass over the rows that reads each large section once
//! (`check_pass.rs`: checksums and every per-entry and per-row check together, symmetry by
//! hash sums, the training graph against the full graph by merging rows); the O(nnz · log
//! d) binary searches that list asymmetric entries run only where the sums disagree.

use crate::progress::Progress;
use crate::store::check_pass;
use crate::store::format::SectionId;
use crate::store::mmap::GraphStore;
use crate::store::scan::{contains, find_entries, Found};
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
    check_with_progress(store, &Progress::hidden())
}

/// [`check`], its pass over the rows reported by `progress` (`saintflow check`'s lines).
pub fn check_with_progress(store: &GraphStore, progress: &Progress) -> Result<(), StoreError> {
    let mut problems: Vec<String> = Vec::new();
    let mut report = |id: SectionId, what: String| {
        problems.push(format!(
            "{}: section {}: {what}",
            store.section_path(id).display(),
            id.name()
        ))
    };

    // The pass hashes every large section; `open` has verified the small ones' checksums.
    let pass = check_pass::run(store, progress);
    let sums = check_pass::HASHED.into_iter().zip(pass.checksums);
    for (id, got) in sums {
        let got = format!("{got:016x}");
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
        let out_of_range = &pass.out_of_range[i];
        if out_of_range.count > 0 {
            report(
                sec,
                format!(
                    "index out of range (expected < N = {n}): {}",
                    describe_entries(out_of_range)
                ),
            );
            structure_ok[i] = false;
        }
        let unsorted = &pass.unsorted[i];
        if unsorted.count > 0 {
            report(
                sec,
                format!(
                    "rows not strictly increasing (unsorted or duplicate entries): {}",
                    describe_rows(unsorted)
                ),
            );
            structure_ok[i] = false;
        }
        let loops = &pass.loops[i];
        if loops.count > 0 {
            report(sec, format!("self loops: {}", describe_entries(loops)));
        }
        // The sums disagree: list the entries by the searches (O(nnz · log d), random
        // reads; only a damaged store gets here).
        if structure_ok[i] && !pass.symmetric(i) {
            let asym = find_entries(csr, |u, v| !contains(csr, v, u));
            report(
                sec,
                format!(
                    "not symmetric, reverse missing for {}",
                    describe_entries(&asym)
                ),
            );
        }
    }

    if structure_ok == [true, true] {
        if pass.extra.count > 0 {
            report(
                SectionId::TrainIndices,
                format!(
                    "training graph has edges absent from the full graph: {}",
                    describe_entries(&pass.extra)
                ),
            );
        }
        if pass.outside.count > 0 {
            report(
                SectionId::TrainIndices,
                format!(
                    "induced training graph has edges touching non-training nodes: {}",
                    describe_entries(&pass.outside)
                ),
            );
        }
        if pass.missing.count > 0 {
            report(
                SectionId::TrainIndices,
                format!(
                    "induced training graph misses full-graph edges between training nodes: {}",
                    describe_entries(&pass.missing)
                ),
            );
        }
    }

    if pass.non_finite.count > 0 {
        report(
            SectionId::Features,
            format!(
                "non-finite values (NaN or ±inf) in {}",
                describe_rows(&pass.non_finite)
            ),
        );
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
