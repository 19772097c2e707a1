//! A store from arrays in memory: what the Python package's `Store.create` (and a Rust
//! caller holding a graph in `Vec`s) writes through. The same writer, CSR builder and
//! header as the file importers, so the same checks and the same atomic publication; the
//! messages name the output store and the argument (`edge_index`, `x`, `y`, `roles`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{Dtype, LabelKind, Role, SectionId, MAX_CLASSES, MAX_NODES, NO_LABEL};
use crate::store::import::{
    commit_import, limits, require_labels, write_no_features, ImportReport, LabelTable,
    TrainGraphMode,
};
use crate::store::time::TimeSpool;
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// The graph's directed entries.
#[derive(Debug, Clone, Copy)]
pub enum Edges<'a> {
    /// Entry k goes from `src[k]` to `dst[k]` (PyG's `edge_index`).
    Coo {
        /// Row of each entry.
        src: &'a [i64],
        /// Column of each entry.
        dst: &'a [i64],
    },
    /// Row v's columns are `indices[indptr[v]..indptr[v + 1]]` (scipy's CSR).
    Csr {
        /// N + 1 non-decreasing offsets from 0.
        indptr: &'a [i64],
        /// Columns.
        indices: &'a [i64],
    },
}

/// Node labels.
#[derive(Debug, Clone, Copy)]
pub enum ArrayLabels<'a> {
    /// One class id per node; negative = unlabelled.
    Single(&'a [i64]),
    /// Row-major N × C of 0/1.
    Multi {
        /// N × C values, each 0 or 1.
        bits: &'a [u8],
        /// C.
        classes: usize,
    },
}

/// What [`import_arrays`] writes.
#[derive(Debug, Clone, Copy)]
pub struct ArrayGraph<'a> {
    /// N; `None` = one past the largest id in `edges` (CSR: `indptr.len() - 1`).
    pub n_nodes: Option<u64>,
    /// The entries.
    pub edges: Edges<'a>,
    /// Add (v, u) for every (u, v); otherwise an asymmetric graph is refused.
    pub symmetrize: bool,
    /// Row-major N × F features and F.
    pub features: Option<(&'a [f32], usize)>,
    /// Labels.
    pub labels: Option<ArrayLabels<'a>>,
    /// One role byte per node ([`Role`]: 0 none, 1 train, 2 val, 3 test).
    pub roles: Option<&'a [u8]>,
    /// The time of each entry of `edges` (COO: entry k; CSR: `indices[k]`'s), stored as
    /// the edge times (`full.time`); an edge given more than once (both directions,
    /// duplicates) keeps the earliest. `None`: no times.
    pub edge_time: Option<&'a [i64]>,
    /// The header's provenance line.
    pub source: &'a str,
}

/// Writes `graph` as the store `out` (replacing a store there when `force`), its training
/// graph induced on the training nodes: [`import_arrays_with`] with
/// [`TrainGraphMode::Induce`].
pub fn import_arrays(
    graph: &ArrayGraph<'_>,
    out: &Path,
    force: bool,
    progress: &Progress,
) -> Result<ImportReport, StoreError> {
    import_arrays_with(graph, TrainGraphMode::Induce, out, force, progress, None)
}

/// [`import_arrays`] with the training graph chosen: [`TrainGraphMode::Induce`] (inductive,
/// GraphSAINT's) or [`TrainGraphMode::Full`] (transductive, OGB's and PyG's Planetoid
/// protocol: every edge, training labels only; the default of `import ogb`, `import
/// edgelist` and the Python package's `Store.create`, issue 55: induced on a Planetoid
/// split, every batch was the same 15 nodes); arrays give no training graph, so
/// [`TrainGraphMode::Given`] is an error.
///
/// A set `stop` (Ctrl-C in Python) ends the import at its next check — every 2^20 edges,
/// and between the stages — with an error, before anything is published: the temporary
/// store is removed and nothing appears at `out`.
pub fn import_arrays_with(
    graph: &ArrayGraph<'_>,
    mode: TrainGraphMode,
    out: &Path,
    force: bool,
    progress: &Progress,
    stop: Option<&AtomicBool>,
) -> Result<ImportReport, StoreError> {
    let stopped = || -> Result<(), StoreError> {
        match stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            true => Err(StoreError::argument(format!(
                "{}: interrupted; nothing was written",
                out.display()
            ))),
            false => Ok(()),
        }
    };
    let start = Instant::now();
    if mode == TrainGraphMode::Given {
        return Err(StoreError::Argument {
            what: "train graph \"given\": arrays give no training graph, expected full or induce"
                .into(),
        });
    }
    let bad = |what: String| StoreError::input(out, what);
    let n = node_count(graph).map_err(bad)?;
    // A count given as an argument is checked against memory before the per-node tables
    // are allocated (issue 55: n_nodes = 4e9 aborted).
    limits::check_memory(
        out,
        &format!("the label and role tables of N = {n} nodes"),
        u128::from(n) * limits::TABLE_BYTES_PER_NODE,
    )?;
    let (labels, roles) = labels_and_roles(graph, out, n)?;
    let entries = check_features_and_times(graph, out, n)?;
    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let expected = entries * if graph.symmetrize { 2 } else { 1 };
    let mut builder = CsrBuilder::new(&scratch, n, expected, DEFAULT_BUCKET_BYTES)?;
    let mut spool = match graph.edge_time {
        Some(_) => Some(TimeSpool::create(&w)?),
        None => None,
    };
    let time = |k: u64| graph.edge_time.map(|t| t[k as usize]);
    let mut pushed = 0u64;
    let mut push = |u: u32, v: u32| -> Result<(), StoreError> {
        if let (Some(spool), Some(t)) = (&mut spool, time(pushed)) {
            spool.push(u, v, t)?;
        }
        pushed += 1;
        if pushed.is_multiple_of(1 << 20) {
            stopped()?;
        }
        builder.push(u, v)?;
        if graph.symmetrize {
            builder.push(v, u)?;
        }
        Ok(())
    };
    match graph.edges {
        Edges::Coo { src, dst } => {
            for (&u, &v) in src.iter().zip(dst) {
                push(u as u32, v as u32)?;
            }
        }
        Edges::Csr { indptr, indices } => {
            for (u, w) in indptr.windows(2).enumerate() {
                for &v in &indices[w[0] as usize..w[1] as usize] {
                    push(u as u32, v as u32)?;
                }
            }
        }
    }
    stopped()?;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let sections = build::write_graph(&w, builder, None, &is_train, progress)?;
    let edge_time = match spool {
        Some(spool) => Some(spool.write(&w, &sections, None, out)?),
        None => None,
    };
    stopped()?;
    let (n_features, feats) = match graph.features {
        Some((x, f)) => {
            let mut s = w.section(SectionId::Features, Dtype::F32)?;
            s.write_f32s(x)?;
            (f as u64, s.finish()?)
        }
        None => (0, write_no_features(&w)?),
    };
    let meta = Meta {
        n_nodes: n,
        n_features,
        n_classes: labels.n_classes,
        label_kind: labels.kind,
        train_graph: mode.stored(),
        split: build::split_counts(&roles),
        source: graph.source.to_string(),
    };
    let asymmetric = |u: u32, v: u32, count: u64| {
        StoreError::input(out, format!(
            "the graph is not symmetric: {count} entries lack their reverse, e.g. ({u}, {v}) is given but ({v}, {u}) is not; pass symmetrize=True to add reverse edges"
        ))
    };
    let check: Option<&dyn Fn(u32, u32, u64) -> StoreError> =
        (!graph.symmetrize).then_some(&asymmetric);
    stopped()?;
    commit_import(
        w, meta, sections, feats, &labels, &roles, start, check, edge_time,
    )
}

/// N, with every id checked against it (no allocation ∝ N before this passes).
fn node_count(graph: &ArrayGraph<'_>) -> Result<u64, String> {
    let given = graph.n_nodes;
    let check_n = |n: u64| -> Result<u64, String> {
        match n {
            0 => Err("the graph has 0 nodes".into()),
            n if n > MAX_NODES => Err(format!("{n} nodes exceed the u32 index limit {MAX_NODES}")),
            n => Ok(n),
        }
    };
    let in_range = |name: &str, ids: &[i64], n: Option<u64>| -> Result<u64, String> {
        let mut max = None::<u64>;
        for (k, &id) in ids.iter().enumerate() {
            if id < 0 || n.is_some_and(|n| id as u64 >= n) || id as u64 >= MAX_NODES {
                let limit = n.map_or(format!("the u32 index limit {MAX_NODES}"), |n| {
                    format!("{n} nodes")
                });
                return Err(format!("{name}[{k}] = {id} is out of range for {limit}"));
            }
            max = Some(max.map_or(id as u64, |m: u64| m.max(id as u64)));
        }
        Ok(max.map_or(0, |m| m + 1))
    };
    match graph.edges {
        Edges::Coo { src, dst } => {
            if src.len() != dst.len() {
                return Err(format!(
                    "edge_index: {} sources but {} destinations",
                    src.len(),
                    dst.len()
                ));
            }
            let a = in_range("edge_index[0]", src, given)?;
            let b = in_range("edge_index[1]", dst, given)?;
            check_n(given.unwrap_or(a.max(b)))
        }
        Edges::Csr { indptr, indices } => {
            let n = indptr.len().checked_sub(1).ok_or("indptr is empty")? as u64;
            if let Some(g) = given.filter(|&g| g != n) {
                return Err(format!(
                    "indptr has {} entries, so {n} rows, but n_nodes = {g}",
                    indptr.len()
                ));
            }
            if indptr[0] != 0 {
                return Err(format!("indptr[0] = {}, expected 0", indptr[0]));
            }
            if let Some(k) = indptr.windows(2).position(|w| w[1] < w[0]) {
                return Err(format!(
                    "indptr decreases at {}: {} then {}",
                    k + 1,
                    indptr[k],
                    indptr[k + 1]
                ));
            }
            let last = indptr[indptr.len() - 1];
            if last as u64 != indices.len() as u64 {
                return Err(format!(
                    "indptr[{n}] = {last} but indices has {} entries",
                    indices.len()
                ));
            }
            in_range("indices", indices, Some(n))?;
            check_n(n)
        }
    }
}

fn label_table(labels: ArrayLabels<'_>, n: usize) -> Result<LabelTable, String> {
    match labels {
        ArrayLabels::Single(y) => {
            if y.len() != n {
                return Err(format!("y: {} labels for {n} nodes", y.len()));
            }
            let mut max = None::<u64>;
            let mut out = Vec::with_capacity(n);
            for (v, &c) in y.iter().enumerate() {
                if c < 0 {
                    out.push(NO_LABEL);
                } else if c as u64 >= MAX_CLASSES {
                    return Err(format!(
                        "y[{v}] = {c}: class ids must be below {MAX_CLASSES}"
                    ));
                } else {
                    out.push(c as u32);
                    max = Some(max.map_or(c as u64, |m: u64| m.max(c as u64)));
                }
            }
            Ok(LabelTable {
                kind: LabelKind::Single,
                n_classes: max.map_or(0, |m| m + 1),
                data: bytemuck::cast_slice(&out).to_vec(),
            })
        }
        ArrayLabels::Multi { bits, classes } => {
            if bits.len() as u64 != n as u64 * classes as u64 {
                return Err(format!(
                    "y: {} values, expected {n} nodes × {classes} classes",
                    bits.len()
                ));
            }
            if classes as u64 >= MAX_CLASSES {
                return Err(format!("y: {classes} classes, the limit is {MAX_CLASSES}"));
            }
            let r = classes.div_ceil(8);
            let mut data = vec![0u8; n * r];
            for (i, &b) in bits.iter().enumerate() {
                let (v, j) = (i / classes, i % classes);
                match b {
                    0 => {}
                    1 => data[v * r + j / 8] |= 1 << (j % 8),
                    b => return Err(format!("y[{v}, {j}] = {b}, expected 0 or 1")),
                }
            }
            Ok(LabelTable {
                kind: LabelKind::Multi,
                n_classes: classes as u64,
                data,
            })
        }
    }
}

/// The labels and roles given (each checked: a role byte is 0 to 3, one per node), or
/// none; labelled nodes required where either is given.
fn labels_and_roles(
    graph: &ArrayGraph<'_>,
    out: &Path,
    n: u64,
) -> Result<(LabelTable, Vec<u8>), StoreError> {
    let bad = |what: String| StoreError::input(out, what);
    let nu = n as usize;
    let labels = match graph.labels {
        None => LabelTable::none(nu),
        Some(l) => label_table(l, nu).map_err(bad)?,
    };
    let roles: Vec<u8> = match graph.roles {
        None => limits::filled(out, "roles", n, Role::None as u8)?,
        Some(r) if r.len() != nu => {
            return Err(bad(format!("roles: {} entries for {n} nodes", r.len())))
        }
        Some(r) => {
            if let Some(v) = r.iter().position(|&b| Role::from_byte(b).is_none()) {
                return Err(bad(format!(
                    "roles: node {v} has role {}, expected 0 (none), 1 (train), 2 (val) or 3 (test)",
                    r[v]
                )));
            }
            r.to_vec()
        }
    };
    if graph.labels.is_some() || graph.roles.is_some() {
        require_labels(out, &labels, &roles)?;
    }
    Ok((labels, roles))
}

/// The features (N × F values, finite) and the edge times (one per entry) checked; the
/// count of entries given.
fn check_features_and_times(graph: &ArrayGraph<'_>, out: &Path, n: u64) -> Result<u64, StoreError> {
    let bad = |what: String| StoreError::input(out, what);
    if let Some((x, f)) = graph.features {
        if x.len() as u64 != n * f as u64 {
            return Err(bad(format!(
                "x: {} values, expected {n} nodes × {f} features",
                x.len()
            )));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(bad(format!(
                "x: row {}, column {} is not finite: {}",
                i / f.max(1),
                i % f.max(1),
                x[i]
            )));
        }
    }

    let entries = match graph.edges {
        Edges::Coo { src, .. } => src.len() as u64,
        Edges::Csr { indices, .. } => indices.len() as u64,
    };
    if let Some(t) = graph.edge_time {
        if t.len() as u64 != entries {
            return Err(bad(format!(
                "edge_time: {} values for {entries} entries, expected one per entry",
                t.len()
            )));
        }
    }
    Ok(entries)
}
