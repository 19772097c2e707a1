//! The split: chosen by name among `split/<name>/` (`choose_split`), its
//! `{train,valid,test}.csv.gz` read into roles (`read_split_into`), a training node required.

use std::path::{Path, PathBuf};

use crate::store::format::Role;
use crate::store::import::limits;
use crate::store::StoreError;

use super::gz::{node_id, GzLines};

/// The split's directory: `opts.split`, else the only one under `split/`.
/// `files` names the split's files in the message for a dataset without one.
pub(crate) fn choose_split(
    dir: &Path,
    want: Option<&str>,
    files: &str,
) -> Result<(String, PathBuf), StoreError> {
    let root = dir.join("split");
    let mut names = Vec::new();
    if root.is_dir() {
        for e in std::fs::read_dir(&root).map_err(|e| StoreError::io(&root, "read directory", e))? {
            let e = e.map_err(|e| StoreError::io(&root, "read directory", e))?;
            if e.path().is_dir() {
                names.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    let listed = || {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    match want {
        Some(w) if names.iter().any(|n| n == w) => Ok((w.to_string(), root.join(w))),
        Some(w) => Err(StoreError::input(
            &root,
            format!("no split named {w:?}; the dataset has: {}", listed()),
        )),
        None => match names.as_slice() {
            [one] => Ok((one.clone(), root.join(one))),
            [] => Err(StoreError::input(
                &root,
                format!("no split: expected split/<name>/{files}"),
            )),
            _ => Err(StoreError::input(
                &root,
                format!("several splits, choose one with --split: {}", listed()),
            )),
        },
    }
}

/// One role byte per node from `train.csv.gz`, `valid.csv.gz`, `test.csv.gz` in `dir`.
pub(super) fn read_split(dir: &Path, n: u64) -> Result<Vec<u8>, StoreError> {
    let mut roles = limits::filled(dir, "roles", n, Role::None as u8)?;
    read_split_into(dir, &mut roles, |lines, l| {
        node_id(lines, l, n, "node").map(|v| (v as usize, u64::from(v)))
    })?;
    Ok(roles)
}

/// The roles of `train.csv.gz`, `valid.csv.gz`, `test.csv.gz` in `dir` into `roles`: each
/// non-empty line a node, `id` giving its index in `roles` and its id as the file names it
/// (errors name that); a node in two files, or twice in one, is an error.
pub(crate) fn read_split_into(
    dir: &Path,
    roles: &mut [u8],
    id: impl Fn(&GzLines, &str) -> Result<(usize, u64), StoreError>,
) -> Result<(), StoreError> {
    for (file, role) in [
        ("train.csv.gz", Role::Train),
        ("valid.csv.gz", Role::Val),
        ("test.csv.gz", Role::Test),
    ] {
        let path = dir.join(file);
        let mut lines = GzLines::open(&path)?;
        while lines.advance()? {
            let l = lines.line().trim();
            if l.is_empty() {
                continue;
            }
            let (v, named) = id(&lines, l)?;
            if roles[v] != Role::None as u8 {
                let other = ["", "train", "valid", "test"][roles[v] as usize];
                return Err(lines.err(if roles[v] == role as u8 {
                    format!("node {named} is listed twice")
                } else {
                    format!(
                        "node {named} is also in {other}.csv.gz: the split's parts must not overlap"
                    )
                }));
            }
            roles[v] = role as u8;
        }
    }
    Ok(())
}

/// Refuses a split without training nodes (nothing to train on: issue 55, a split file
/// that read as empty gave a store that trained and printed a test accuracy of 0). An
/// empty validation or test part is reported by [`warnings`](super::warnings), as for
/// every importer.
pub(super) fn require_training_nodes(dir: &Path, roles: &[u8]) -> Result<(), StoreError> {
    if !roles.contains(&(Role::Train as u8)) {
        return Err(StoreError::input(
            dir.join("train.csv.gz"),
            "no training nodes (after leaving out split nodes without a label), expected at least one",
        ));
    }
    Ok(())
}
