//! `import graphsaint DIR`: GraphSAINT's dataset layout (`adj_full.npz`, `adj_train.npz`,
//! `feats.npy`, `class_map.json`, `role.json`), single- or multi-label.
//!
//! The adjacency files are `scipy.sparse.save_npz` archives of N×N CSR matrices; edge
//! values are ignored (saintflow graphs are unweighted; normalisation is the plan's job).
//! Rows may be unsorted in the input; the store's rows are sorted and deduplicated, and self
//! loops dropped (both counted in the report). Both graphs must be symmetric and
//! `adj_train` a subgraph of `adj_full`: anything else is an error naming the file.
//! [`Resplit`] replaces `role.json`'s split by a seeded one with exact fractions (GAD's
//! 45/18/37 on Cora), the training graph then induced on the new training nodes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::npy::{open_npy, plain_dtype, VettedNpy};
use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{pack, CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{Role, TrainGraph, MAX_NODES};
use crate::store::gen::exact_split;
use crate::store::import::{
    read_class_map, read_roles, require_labels, write_features_npy, write_roles, ImportReport,
};
use crate::store::scan::{asymmetric_entries, entries_not_in};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// Which training graph to store: one vocabulary for every importer (`--train-graph`).
/// The default is each importer's dataset convention: [`Given`](Self::Given) for
/// GraphSAINT's directories (inductive: `adj_train.npz`), [`Full`](Self::Full) for OGB and
/// edge lists (OGB's node-property protocol is transductive: the whole graph, training
/// labels only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrainGraphMode {
    /// The training graph the dataset gives (GraphSAINT's `adj_train.npz`); only the
    /// GraphSAINT importer has one.
    #[default]
    Given,
    /// Induced from the full graph on the training nodes (inductive: edges with both ends
    /// in training).
    Induce,
    /// The full graph itself (transductive): every edge, training labels only. Stored as
    /// a given training graph equal to the full one.
    Full,
}

impl TrainGraphMode {
    /// The flag's word: `given`, `induce`, `full`.
    pub fn word(self) -> &'static str {
        match self {
            TrainGraphMode::Given => "given",
            TrainGraphMode::Induce => "induce",
            TrainGraphMode::Full => "full",
        }
    }

    /// The store's record of it.
    pub fn stored(self) -> TrainGraph {
        match self {
            TrainGraphMode::Induce => TrainGraph::Induced,
            TrainGraphMode::Given | TrainGraphMode::Full => TrainGraph::Given,
        }
    }

    /// Whether node `v` (its role byte) keeps its edges in the training graph built from
    /// the full one; unused for [`Given`](Self::Given).
    pub fn keeps(self, role: u8) -> bool {
        match self {
            TrainGraphMode::Full => true,
            _ => role == Role::Train as u8,
        }
    }
}

/// Options of the GraphSAINT importer.
#[derive(Debug, Clone, Default)]
pub struct GraphSaintOptions {
    /// Standardise features with the training nodes' mean and standard deviation.
    pub standardize: bool,
    /// Which training graph to store.
    pub train_graph: TrainGraphMode,
    /// Replace `role.json`'s split by a seeded one with these exact fractions.
    pub resplit: Option<Resplit>,
}

/// A seeded split replacing `role.json`'s (GAD's Cora split is 45/18/37): the labelled
/// nodes shuffled by [`exact_split`], the train/val/test counts their fractions of the
/// labelled nodes up to rounding. The training graph of the old split would not match: it
/// is induced on the new training nodes ([`TrainGraphMode::Given`] is refused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resplit {
    /// Train, val, test fractions, each in [0, 1], summing to at most 1.
    pub fractions: [f64; 3],
    /// Seed of the split.
    pub seed: u64,
}

/// A CSR read from an npz, as plain arrays.
struct NpzCsr {
    n: u64,
    indptr: Vec<u64>,
    indices: Vec<u32>,
}

fn int_vec(
    arr: npyz::NpyFile<impl std::io::Read>,
    path: &Path,
    member: &str,
) -> Result<Vec<i64>, StoreError> {
    let bad = |e: std::io::Error| StoreError::input(path, format!("member {member}: {e}"));
    // The shape was checked against the member's real size (`open_npy`); the i64 copy
    // must still fit in memory.
    crate::store::import::limits::check_memory(
        path,
        &format!("member {member}: {} entries as i64", arr.len()),
        u128::from(arr.len()) * 8,
    )?;
    let t =
        plain_dtype(&arr).map_err(|e| StoreError::input(path, format!("member {member}: {e}")))?;
    Ok(match t.as_str() {
        "<i4" => arr
            .into_vec::<i32>()
            .map_err(bad)?
            .into_iter()
            .map(i64::from)
            .collect(),
        "<i8" => arr.into_vec::<i64>().map_err(bad)?,
        "<u4" => arr
            .into_vec::<u32>()
            .map_err(bad)?
            .into_iter()
            .map(i64::from)
            .collect(),
        t => {
            return Err(StoreError::input(
                path,
                format!("member {member}: dtype {t}, expected <i4 or <i8"),
            ))
        }
    })
}

fn member<'a, R: std::io::Read + std::io::Seek>(
    npz: &'a mut npyz::npz::NpzArchive<R>,
    path: &Path,
    name: &str,
) -> Result<VettedNpy<impl std::io::Read + 'a>, StoreError> {
    if !npz.array_names().any(|n| n == name) {
        return Err(StoreError::input(
            path,
            format!("missing member {name}.npy (not a scipy.sparse save_npz archive?)"),
        ));
    }
    // Through the zip archive rather than `NpzArchive::by_name`, so that the member's NPY
    // header is vetted before npyz parses it (`open_npy`).
    // The member's declared sizes are vetted against the archive's length, and its
    // header's shape against the member's size, before anything is allocated from them
    // (issue 55).
    let archive_len = std::fs::metadata(path)
        .map_err(|e| StoreError::io(path, "stat", e))?
        .len();
    let file = npz
        .zip_archive()
        .by_name(&npyz::npz::file_name_from_array_name(name))
        .map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
    let bad = |e: String| StoreError::input(path, format!("member {name}: {e}"));
    let total = crate::store::import::limits::npz_member_len(
        file.size(),
        file.compressed_size(),
        archive_len,
    )
    .map_err(bad)?;
    open_npy(file, Some(total)).map_err(bad)
}

/// Reads and validates a scipy CSR npz: square, indptr monotone from 0 to nnz, indices in
/// range.
fn read_csr_npz(path: &Path) -> Result<NpzCsr, StoreError> {
    let mut npz = npyz::npz::NpzArchive::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StoreError::io(path, "open", e),
        _ => StoreError::input(path, format!("not a valid npz (zip) archive: {e}")),
    })?;
    let format = member(&mut npz, path, "format")?
        .into_vec::<Vec<u8>>()
        .map_err(|e| StoreError::input(path, format!("member format: {e}")))?;
    let format = format.first().cloned().unwrap_or_default();
    if format != b"csr" {
        return Err(StoreError::input(
            path,
            format!(
                "sparse format expected \"csr\", got {:?}",
                String::from_utf8_lossy(&format)
            ),
        ));
    }
    let shape = int_vec(member(&mut npz, path, "shape")?, path, "shape")?;
    let (rows, cols) = match shape.as_slice() {
        [r, c] => (*r, *c),
        s => {
            return Err(StoreError::input(
                path,
                format!("shape expected 2 entries, got {s:?}"),
            ))
        }
    };
    if rows != cols || rows < 0 {
        return Err(StoreError::input(
            path,
            format!("adjacency expected square, got shape ({rows}, {cols})"),
        ));
    }
    let n = rows as u64;
    if n > MAX_NODES {
        return Err(StoreError::input(
            path,
            format!("{n} nodes exceed the u32 index limit {MAX_NODES}"),
        ));
    }
    let indptr = int_vec(member(&mut npz, path, "indptr")?, path, "indptr")?;
    let indices = int_vec(member(&mut npz, path, "indices")?, path, "indices")?;
    let data_len = member(&mut npz, path, "data")?.len();
    if indptr.len() as u64 != n + 1 {
        return Err(StoreError::input(
            path,
            format!(
                "indptr expected N+1 = {} entries, got {}",
                n + 1,
                indptr.len()
            ),
        ));
    }
    if data_len != indices.len() as u64 {
        return Err(StoreError::input(
            path,
            format!(
                "data expected {} entries (as indices), got {data_len}",
                indices.len()
            ),
        ));
    }
    let nnz = indices.len() as i64;
    if indptr[0] != 0 || indptr[n as usize] != nnz {
        return Err(StoreError::input(
            path,
            format!(
                "indptr expected to run from 0 to nnz = {nnz}, got {} .. {}",
                indptr[0], indptr[n as usize]
            ),
        ));
    }
    if let Some(i) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(StoreError::input(
            path,
            format!(
                "indptr decreases at row {i}: {} > {}",
                indptr[i],
                indptr[i + 1]
            ),
        ));
    }
    if let Some(k) = indices.iter().position(|&x| x < 0 || x as u64 >= n) {
        let row = indptr.partition_point(|&p| p <= k as i64) - 1;
        return Err(StoreError::input(
            path,
            format!("indices[{k}] (row {row}) = {}, expected 0..{n}", indices[k]),
        ));
    }
    Ok(NpzCsr {
        n,
        indptr: indptr.into_iter().map(|x| x as u64).collect(),
        indices: indices.into_iter().map(|x| x as u32).collect(),
    })
}

fn push_csr(builder: &mut CsrBuilder, csr: &NpzCsr) -> Result<(), StoreError> {
    let mut keys: Vec<u64> = Vec::new();
    let mut bucket = usize::MAX;
    for u in 0..csr.n as usize {
        let b = builder.bucket_of(u as u32);
        if b != bucket && !keys.is_empty() {
            builder.push_bucket(bucket, &keys)?;
            keys.clear();
        }
        bucket = b;
        for &v in &csr.indices[csr.indptr[u] as usize..csr.indptr[u + 1] as usize] {
            keys.push(pack(u as u32, v));
        }
    }
    if !keys.is_empty() {
        builder.push_bucket(bucket, &keys)?;
    }
    Ok(())
}

/// Imports the GraphSAINT dataset in `dir` into a new store at `out`.
pub fn import_graphsaint(
    dir: &Path,
    out: &Path,
    opts: &GraphSaintOptions,
    force: bool,
    progress: &Progress,
) -> Result<ImportReport, StoreError> {
    let start = Instant::now();
    if !dir.is_dir() {
        return Err(StoreError::input(
            dir,
            "not a directory (expected a GraphSAINT dataset directory)",
        ));
    }
    if let Some(r) = &opts.resplit {
        let [tr, va, te] = r.fractions;
        let ok = |f: f64| (0.0..=1.0).contains(&f);
        if !(ok(tr) && ok(va) && ok(te) && tr + va + te <= 1.0 + 1e-9) {
            return Err(StoreError::input(
                dir,
                format!("--resplit {tr},{va},{te}: fractions expected in [0, 1] with a sum of at most 1"),
            ));
        }
        if opts.train_graph == TrainGraphMode::Given {
            return Err(StoreError::input(
                dir,
                "--resplit with --train-graph given: adj_train.npz is role.json's training graph, \
                 not the new split's; the training graph is induced on the new training nodes \
                 (--train-graph induce, what --resplit implies)",
            ));
        }
    }
    let file = |name: &str| -> PathBuf { dir.join(name) };
    let (full_path, train_path) = (file("adj_full.npz"), file("adj_train.npz"));
    let full = read_csr_npz(&full_path)?;
    let n = full.n as usize;
    let labels = read_class_map(&file("class_map.json"), n)?;
    let roles = match &opts.resplit {
        // role.json is not read: the labelled nodes get the new split.
        Some(r) => exact_split(r.seed, r.fractions, n, |v| labels.is_labelled(v)),
        None => read_roles(&file("role.json"), n)?,
    };
    require_labels(&file("class_map.json"), &labels, &roles)?;

    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let mut full_b = CsrBuilder::new(
        &scratch,
        full.n,
        full.indices.len() as u64,
        DEFAULT_BUCKET_BYTES,
    )?;
    push_csr(&mut full_b, &full)?;
    drop(full);
    let train_b = match opts.train_graph {
        TrainGraphMode::Induce | TrainGraphMode::Full => None,
        TrainGraphMode::Given => {
            let train = read_csr_npz(&train_path)?;
            if train.n != n as u64 {
                return Err(StoreError::input(
                    &train_path,
                    format!(
                        "shape expected ({n}, {n}) as adj_full.npz, got ({0}, {0})",
                        train.n
                    ),
                ));
            }
            let mut b = CsrBuilder::new(
                &scratch,
                train.n,
                train.indices.len() as u64,
                DEFAULT_BUCKET_BYTES,
            )?;
            push_csr(&mut b, &train)?;
            Some(b)
        }
    };
    let mode = opts.train_graph;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let graph = build::write_graph(&w, full_b, train_b, &is_train, progress)?;

    let (n_features, feats) =
        write_features_npy(&w, &file("feats.npy"), n, opts.standardize, &roles)?;
    let labels_entry = labels.write(&w)?;
    let roles_entry = write_roles(&w, &roles)?;
    let report = ImportReport::new(n as u64, &graph, start);
    let meta = Meta {
        n_nodes: n as u64,
        n_features,
        n_classes: labels.n_classes,
        label_kind: labels.kind,
        train_graph: opts.train_graph.stored(),
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import graphsaint {}{}{}{}",
            dir.display(),
            if opts.standardize {
                " --standardize"
            } else {
                ""
            },
            if opts.train_graph == TrainGraphMode::Given {
                String::new()
            } else {
                format!(" --train-graph {}", opts.train_graph.word())
            },
            match &opts.resplit {
                Some(r) => format!(
                    " --resplit {},{},{} --split-seed {}",
                    r.fractions[0], r.fractions[1], r.fractions[2], r.seed
                ),
                None => String::new(),
            },
        ),
    };
    let header = build::header(meta, graph, feats, labels_entry, roles_entry);
    w.commit(&header, |store| {
        let asym = asymmetric_entries(store.full());
        if let Some(&(u, v)) = asym.first.first() {
            return Err(StoreError::input(&full_path, format!(
                "adjacency is not symmetric: {} entries lack their reverse, e.g. ({u}, {v}) is present but ({v}, {u}) is not", asym.count)));
        }
        let extra = entries_not_in(store.train(), store.full());
        if let Some(&(u, v)) = extra.first.first() {
            return Err(StoreError::input(&train_path, format!(
                "{} entries are absent from adj_full.npz, e.g. ({u}, {v}): the training graph must be a subgraph", extra.count)));
        }
        let asym = asymmetric_entries(store.train());
        if let Some(&(u, v)) = asym.first.first() {
            return Err(StoreError::input(&train_path, format!(
                "adjacency is not symmetric: {} entries lack their reverse, e.g. ({u}, {v})", asym.count)));
        }
        Ok(())
    })?;
    Ok(ImportReport {
        seconds: start.elapsed().as_secs_f64(),
        ..report
    })
}
