//! [`StoreError`]: the store layer's errors (on-disk format, mmap, importers, generator,
//! `check`), each naming the file and saying what is wrong.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Errors of the store layer: on-disk format, mmap, importers, generator.
///
/// Every message names the file and says what is wrong, in the form
/// `<path>: <section>: <what>, expected <x>, got <y>` where the parts apply.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operating-system error on a file (open, read, write, fsync, rename, mmap).
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// What we were doing ("open", "write", "mmap", ...).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A store file exists but its content breaks the format.
    #[error("{}: section {section}: {what}", path.display())]
    Corrupt {
        /// The file holding the section.
        path: PathBuf,
        /// The section's name (`header`, `full.indices`, ...).
        section: String,
        /// What is wrong, with the expected and actual values.
        what: String,
    },
    /// An importer's or generator's input is malformed or inconsistent.
    #[error("{}: {what}", path.display())]
    Input {
        /// The input file (or directory) at fault.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A caller's argument is out of range (a node id ≥ N, a bad parameter).
    #[error("{what}")]
    Argument {
        /// What is wrong.
        what: String,
    },
    /// The output path already exists and overwriting was not asked for.
    #[error("{}: already exists (pass --force to replace it)", path.display())]
    Exists {
        /// The existing path.
        path: PathBuf,
    },
    /// The output path exists and is not a store: saintflow replaces only what it wrote.
    #[error("{}: exists and is not a saintflow store (no {} starting with the store's magic); refusing to replace it, even with --force", path.display(), crate::store::format::HEADER_FILE)]
    NotAStore {
        /// The existing path.
        path: PathBuf,
    },
    /// `check` found problems; all of them are listed.
    #[error("{}: {} problem(s) found:\n{}", path.display(), problems.len(), Problems(problems))]
    CheckFailed {
        /// The store directory.
        path: PathBuf,
        /// Each problem found, already formatted with file and section.
        problems: Vec<String>,
    },
}

impl StoreError {
    /// Ok when `problems` is empty, else [`StoreError::CheckFailed`] of the store at `path`
    /// listing them: how `check` and the writers' commit-time checks report.
    pub(crate) fn from_problems(
        path: &std::path::Path,
        problems: Vec<String>,
    ) -> Result<(), StoreError> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StoreError::CheckFailed {
                path: path.to_path_buf(),
                problems,
            })
        }
    }
}

struct Problems<'a>(&'a [String]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  - {p}")?;
        }
        Ok(())
    }
}

impl From<crate::atomic::IoAt> for StoreError {
    fn from(e: crate::atomic::IoAt) -> Self {
        StoreError::io(e.path, e.op, e.source)
    }
}

impl From<crate::npy::NpyError> for StoreError {
    fn from(e: crate::npy::NpyError) -> Self {
        use crate::npy::NpyError;
        match e {
            NpyError::Io { path, op, source } => StoreError::io(path, op, source),
            NpyError::Input { path, what } => StoreError::input(path, what),
            // Readers do not reserve space; kept with the path and the cause all the same.
            NpyError::Space(e) => StoreError::io(e.path, "reserve disk space for", e.source),
        }
    }
}

impl StoreError {
    /// An I/O error on `path` while doing `op`.
    pub fn io(path: impl AsRef<Path>, op: &'static str, source: io::Error) -> Self {
        StoreError::Io {
            path: path.as_ref().to_path_buf(),
            op,
            source,
        }
    }

    /// A format violation in `section` of the file at `path`.
    pub fn corrupt(path: impl AsRef<Path>, section: &str, what: impl Into<String>) -> Self {
        StoreError::Corrupt {
            path: path.as_ref().to_path_buf(),
            section: section.to_string(),
            what: what.into(),
        }
    }

    /// A malformed importer or generator input at `path`.
    pub fn input(path: impl AsRef<Path>, what: impl Into<String>) -> Self {
        StoreError::Input {
            path: path.as_ref().to_path_buf(),
            what: what.into(),
        }
    }

    /// Neighbour `v` of node `u` is not a node id (< `n_nodes`): a corrupt store read
    /// before `check` ran.
    pub fn neighbor_out_of_range(u: u32, v: u32, n_nodes: u64) -> Self {
        StoreError::argument(format!(
            "neighbour {v} of node {u} out of range, expected < {n_nodes} (corrupt store? run `saintflow check`)"
        ))
    }

    /// The entry (u, v) of a sampled subgraph has no reverse: the store's neighbour lists
    /// are unsorted or not symmetric (a corrupt store read before `check` ran).
    pub fn not_symmetric(u: u32, v: u32) -> Self {
        StoreError::argument(format!(
            "neighbour lists not symmetric or not sorted: entry ({u}, {v}) has no reverse where expected (corrupt store? run `saintflow check`)"
        ))
    }

    /// Node u's neighbour list is not strictly increasing at neighbour v (a corrupt store
    /// read before `check` ran).
    pub fn row_not_sorted(u: u32, v: u32) -> Self {
        StoreError::argument(format!(
            "neighbours of node {u} not in increasing order at {v} (corrupt store? run `saintflow check`)"
        ))
    }

    /// A caller's argument out of range.
    pub fn argument(what: impl Into<String>) -> Self {
        StoreError::Argument { what: what.into() }
    }
}
