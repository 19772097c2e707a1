//! `edgelist`: the edge-list importer on arbitrary bytes as the file, into a temporary
//! store. The first byte holds options: bit 0 `symmetrize`; bit 1 a node count (the next
//! byte, 0..=255) instead of the largest id + 1; bit 2 `--time-column 3` (issue 52: each
//! line's third column an integer time, the store's edge times).
//!
//! Property: the import returns; when it succeeds the store passes `open_verified` (the
//! edge times' checks included: both entries of an edge equal, min and max) with N as
//! reported, at most the file's lines (twice, symmetrised) as entries, and with bit 2 one
//! time per entry.
//! Ids far beyond the file's lines (one line "0 4000000000") are refused by the importer
//! before it allocates anything proportional to them, so every input goes in.

use saintflow::progress::Progress;
use saintflow::store::import::{import_edgelist, EdgeListOptions};
use saintflow::store::GraphStore;

use crate::input::Input;

/// The fuzz target's body (see the module documentation).
pub fn edgelist(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let n_nodes = (flags & 2 != 0).then(|| u64::from(input.u8()));
    let file = input.rest();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = tmp.path().join("edges.txt");
    std::fs::write(&path, file).expect("input written");
    let out = tmp.path().join("out.sf");
    let opts = EdgeListOptions {
        symmetrize: flags & 1 != 0,
        n_nodes,
        time_column: (flags & 4 != 0).then_some(3),
        ..EdgeListOptions::default()
    };
    let Ok(report) = import_edgelist(&path, &out, &opts, false, &Progress::hidden()) else {
        return;
    };
    let store = match GraphStore::open_verified(&out) {
        Ok(s) => s,
        Err(e) => panic!("an imported store fails verification: {e}"),
    };
    assert_eq!(store.n_nodes() as u64, report.n_nodes, "N as reported");
    let lines = file.split(|&b| b == b'\n').count() as u64;
    assert!(
        report.entries <= 2 * lines,
        "{} entries from {lines} lines",
        report.entries
    );
    assert_eq!(
        store.edge_times().map(|t| t.len() as u64),
        (flags & 4 != 0).then_some(report.entries),
        "one time per entry, only with the time column"
    );
}
