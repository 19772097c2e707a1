//! `import edgelist FILE`: whitespace-separated edge lists.
//!
//! One edge per line: two non-negative integer node ids, then anything (weights,
//! timestamps) which is ignored. Blank lines and lines starting with `#` or `%` are
//! comments. Duplicates and self loops are dropped and counted. By default the list must
//! already hold both directions of every edge (an asymmetric list is an error naming an
//! example); `symmetrize` adds every reverse entry. The file is read twice (once for the
//! node count unless given) and edges go through the external CSR builder, so memory does
//! not grow with the number of edges.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::check::asymmetric_entries;
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{Role, TrainGraph, MAX_NODES};
use crate::store::gen::random_role;
use crate::store::import::{
    read_labels, read_roles, require_labels, write_features_npy, write_no_features, write_roles,
    ImportReport, LabelTable,
};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// Options of the edge-list importer.
#[derive(Debug, Clone)]
pub struct EdgeListOptions {
    /// Add the reverse of every edge.
    pub symmetrize: bool,
    /// Node count; default: largest id + 1.
    pub n_nodes: Option<u64>,
    /// `(N, F)` features as `.npy`.
    pub features: Option<PathBuf>,
    /// Standardise features on the training nodes.
    pub standardize: bool,
    /// Labels: a GraphSAINT `class_map.json` or a `.npy` (1-D class ids or 2-D 0/1).
    pub labels: Option<PathBuf>,
    /// Roles: a GraphSAINT `role.json`; default: a random split by `split` and `seed`.
    pub roles: Option<PathBuf>,
    /// Train/val/test fractions of the random split (used when labels are given without roles).
    pub split: [f64; 3],
    /// Seed of the random split.
    pub seed: u64,
}

impl Default for EdgeListOptions {
    fn default() -> Self {
        EdgeListOptions {
            symmetrize: false,
            n_nodes: None,
            features: None,
            standardize: false,
            labels: None,
            roles: None,
            split: [0.6, 0.2, 0.2],
            seed: 1,
        }
    }
}

/// Calls `each(line_no, u, v)` for every edge line of `path`.
fn scan(
    path: &Path,
    mut each: impl FnMut(u64, u64, u64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = String::new();
    let mut line_no = 0u64;
    loop {
        line.clear();
        let got = reader.read_line(&mut line).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                StoreError::input(path, format!("line {}: not valid UTF-8 text", line_no + 1))
            } else {
                StoreError::io(path, "read", e)
            }
        })?;
        if got == 0 {
            return Ok(());
        }
        line_no += 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with('%') {
            continue;
        }
        let mut tok = t.split_whitespace();
        let mut id = |what: &str| -> Result<u64, StoreError> {
            let s = tok.next().ok_or_else(|| {
                StoreError::input(
                    path,
                    format!("line {line_no}: expected two node ids, got {t:?}"),
                )
            })?;
            s.parse::<u64>().map_err(|_| {
                StoreError::input(
                    path,
                    format!("line {line_no}: {what} node id {s:?} is not a non-negative integer"),
                )
            })
        };
        let u = id("first")?;
        let v = id("second")?;
        each(line_no, u, v)?;
    }
}

/// Imports the edge list `path` (and optional features, labels, roles) into `out`.
pub fn import_edgelist(
    path: &Path,
    out: &Path,
    opts: &EdgeListOptions,
    force: bool,
    progress: &Progress,
) -> Result<ImportReport, StoreError> {
    let start = Instant::now();
    let (mut max_id, mut lines) = (None::<u64>, 0u64);
    scan(path, |_, u, v| {
        max_id = Some(max_id.unwrap_or(0).max(u).max(v));
        lines += 1;
        Ok(())
    })?;
    let n = match (opts.n_nodes, max_id) {
        (Some(n), Some(m)) if m >= n => {
            return Err(StoreError::input(
                path,
                format!("node id {m} out of range for --nodes {n}"),
            ))
        }
        (Some(n), _) => n,
        (None, Some(m)) => m + 1,
        (None, None) => 0,
    };
    if n > MAX_NODES {
        return Err(StoreError::input(
            path,
            format!("{n} nodes exceed the u32 index limit {MAX_NODES}"),
        ));
    }
    let nu = n as usize;
    let labels = match &opts.labels {
        Some(p) => read_labels(p, nu)?,
        None => LabelTable::none(nu),
    };
    // A random split covers only labelled nodes: an unlabelled node cannot be trained or
    // scored on.
    let roles: Vec<u8> = match (&opts.roles, &opts.labels) {
        (Some(p), _) => read_roles(p, nu)?,
        (None, Some(_)) => (0..nu)
            .map(|v| match labels.is_labelled(v) {
                true => random_role(opts.seed, opts.split, v as u64) as u8,
                false => Role::None as u8,
            })
            .collect(),
        (None, None) => vec![Role::None as u8; nu],
    };
    if let Some(p) = &opts.labels {
        require_labels(p, &labels, &roles)?;
    }

    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let expected = lines * if opts.symmetrize { 2 } else { 1 };
    let mut builder = CsrBuilder::new(&scratch, n, expected, DEFAULT_BUCKET_BYTES)?;
    let bar = progress.bar(lines, "edges", "lines");
    scan(path, |_, u, v| {
        builder.push(u as u32, v as u32)?;
        if opts.symmetrize {
            builder.push(v as u32, u as u32)?;
        }
        bar.inc(1);
        Ok(())
    })?;
    bar.finish_and_clear();
    let is_train = |v: u32| roles[v as usize] == Role::Train as u8;
    let graph = build::write_graph(&w, builder, None, &is_train, progress)?;
    let (n_features, feats) = match &opts.features {
        Some(p) => write_features_npy(&w, p, nu, opts.standardize, &roles)?,
        None => (0, write_no_features(&w)?),
    };
    let report = ImportReport::new(n, &graph, start);
    let meta = Meta {
        n_nodes: n,
        n_features,
        n_classes: labels.n_classes,
        label_kind: labels.kind,
        train_graph: TrainGraph::Induced,
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import edgelist {}{}",
            path.display(),
            if opts.symmetrize { " --symmetrize" } else { "" }
        ),
    };
    let header = build::header(
        meta,
        graph,
        feats,
        labels.write(&w)?,
        write_roles(&w, &roles)?,
    );
    w.commit(&header, |store| {
        let asym = asymmetric_entries(store.full());
        match asym.first.first() {
            Some(&(u, v)) if !opts.symmetrize => Err(StoreError::input(path, format!(
                "edge list is not symmetric: {} entries lack their reverse, e.g. {u} {v} is listed but {v} {u} is not; pass --symmetrize to add reverse edges",
                asym.count))),
            _ => Ok(()),
        }
    })?;
    Ok(ImportReport {
        seconds: start.elapsed().as_secs_f64(),
        ..report
    })
}
