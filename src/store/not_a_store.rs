//! What a path given as a store is when it is not one (issue 54, item 8): a GraphSAINT or
//! OGB dataset directory, an edge list, an empty directory.
//! [`GraphStore::open`](crate::store::GraphStore::open) asks here before it reports a
//! missing header, so the message names the importer that makes a store of it instead of
//! `header.sf: cannot open`. Only the directory's listing and a file's first bytes are
//! read.

use std::path::Path;

use super::format::HEADER_FILE;
use super::StoreError;

/// The error for `path` (no store header there), saying what it is and which command makes
/// a store of it; None where it looks like a store that lost its header (some of a store's
/// own files are there), which the header's own error reports.
pub(crate) fn diagnose(path: &Path) -> Option<StoreError> {
    let what = if path.is_dir() {
        dir_kind(path)?
    } else if path.is_file() {
        file_kind(path)
    } else if path.exists() {
        "is not a store directory (a store is the directory `saintflow import …` or `saintflow gen …` writes)".to_string()
    } else {
        "does not exist: make a store with `saintflow import` (edge lists, GraphSAINT and OGB datasets) or `saintflow gen kronecker`".to_string()
    };
    Some(StoreError::Input {
        path: path.to_path_buf(),
        what,
    })
}

/// The `-o` a suggestion names: the dataset's name with `.sf`.
fn store_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map_or_else(|| "graph".to_string(), |s| s.to_string_lossy().into_owned());
    format!("{stem}.sf")
}

/// What a directory without a store header is, or None when it holds a store's own files.
fn dir_kind(dir: &Path) -> Option<String> {
    let has = |name: &str| dir.join(name).exists();
    let shown = dir.display();
    let out = store_name(dir);
    if has("adj_full.npz") || (has("role.json") && has("class_map.json")) {
        return Some(format!(
            "is a GraphSAINT dataset directory (adj_full.npz, feats.npy, class_map.json, role.json), not a saintflow store: import it once with `saintflow import graphsaint {shown} -o {out}`, then pass `--graph {out}`"
        ));
    }
    if has("raw") && (has("raw/edge.csv.gz") || has("raw/data.npz")) {
        let link = std::fs::read_dir(dir.join("split"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|s| s.path().join("valid.pt").exists() || s.path().join("test.pt").exists());
        let cmd = if link { "ogb-link" } else { "ogb" };
        return Some(format!(
            "is an OGB dataset directory (raw/, split/), not a saintflow store: import it once with `saintflow import {cmd} {shown} -o {out}`, then pass `--graph {out}`"
        ));
    }
    let names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // A store that lost its header (its sections are `full.offsets`, `features.f32`, …):
    // the header's own error says which file is missing.
    let store_file = |n: &String| {
        crate::store::SectionId::ALL
            .iter()
            .any(|id| id.file_name() == n)
    };
    if names.iter().any(store_file) {
        return None;
    }
    Some(if names.is_empty() {
        format!("is an empty directory, not a saintflow store (no {HEADER_FILE}): make one there with `saintflow import` (edge lists, GraphSAINT and OGB datasets) or `saintflow gen kronecker`")
    } else {
        format!("is not a saintflow store (no {HEADER_FILE}): a store is the directory `saintflow import` (edge lists, GraphSAINT and OGB datasets) or `saintflow gen kronecker` writes")
    })
}

/// What a file given as a store is: an archive or array (a dataset's part), or text (an
/// edge list, most likely).
fn file_kind(file: &Path) -> String {
    let out = store_name(file);
    let shown = file.display();
    let mut head = [0u8; 512];
    let n = std::fs::File::open(file)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let head = &head[..n];
    if head.starts_with(b"\x93NUMPY") || head.starts_with(b"PK") {
        return format!(
            "is a file (an .npy or .npz array), not a saintflow store (a directory): a GraphSAINT dataset's directory is imported with `saintflow import graphsaint DIR -o {out}`; features and labels go to `saintflow import edgelist EDGES --features X.npy --labels Y.npy`"
        );
    }
    let text = !head.is_empty() && std::str::from_utf8(head).is_ok();
    if text {
        return format!(
            "is a text file, not a saintflow store (a directory): for an edge list (`u v` per line), import it once with `saintflow import edgelist {shown} -o {out} --symmetrize` (add `--features X.npy --labels Y.npy --split 0.6,0.2,0.2` to train on it), then pass `--graph {out}`"
        );
    }
    "is a file, not a saintflow store (a directory that `saintflow import` or `saintflow gen` writes)".to_string()
}
