//! `import ogb DIR`: Open Graph Benchmark node-property-prediction datasets, in OGB's two
//! on-disk layouts (the directory the `ogb` package downloads, e.g. `ogbn-arxiv/`).
//!
//! * csv.gz: `raw/edge.csv.gz` (`src,dst` per line, 0-based), `raw/num-node-list.csv.gz`
//!   and `raw/num-edge-list.csv.gz` (one count each), `raw/node-feat.csv.gz` (optional,
//!   one row of floats per node), `raw/node-label.csv.gz` (one row per node).
//! * binary: `raw/data.npz` (`edge_index` 2 × E, `node_feat` N × F, `num_nodes_list`,
//!   `num_edges_list`) and `raw/node-label.npz` (`node_label`, N × T floats).
//!
//! Both take the split from `split/<name>/{train,valid,test}.csv.gz` (one node id per
//! line); the split is chosen by name, the only one by default.
//!
//! Edges are made undirected (every entry pushed in both directions, as OGB's loaders do
//! for these datasets; a self loop once); self loops and duplicates are dropped and
//! counted by the CSR builder, as for edge lists. The training graph is the full graph by
//! default (OGB's node-property protocol is transductive: every edge, training labels
//! only), or induced on the training nodes with [`TrainGraphMode::Induce`].
//! Labels: one column is single-task multiclass (an integer class per node), several are
//! multi-task binary (0/1 per task), stored multi-label; `nan` or an empty field is no
//! label. The store's multi-label rows cannot say "task unknown": a NaN task is stored as
//! 0 (counted in a note), and a split node with no positive task, which the store format
//! counts as unlabelled, is left out of the split (counted in a note); a split node whose
//! label is NaN (single-task) or all NaN (multi-task) is an error.
//!
//! Memory: gzip is decoded as a stream (`flate2`), edges go through the external
//! [`CsrBuilder`], features are written row by row; what is held is O(N) (labels, roles)
//! plus one row. In the binary layout `edge_index` is 2 × E in C order (all sources, then
//! all destinations): the sources are spooled to a scratch file and read back beside the
//! destinations, so memory stays O(1) in E there too. Features are parsed with Rust's
//! correctly rounded `str::parse::<f32>` (OGB's loader parses f64 with pandas then casts,
//! which may differ in the last bit for text with more digits than f32 keeps).
//!
//! Heterogeneous datasets (ogbn-mag: `raw/num-node-dict.csv.gz`, `raw/relations/`,
//! `raw/node-feat/<type>/`) are imported as typed stores by `ogb_hetero/` (issue 57);
//! graph-property datasets (several graphs in `num-node-list`) are refused. Extra node or
//! edge files (`node_year.csv.gz`, `edge-feat.csv.gz`) are ignored with a note.
//!
//! Here the options and the import's stages (counts checked, labels and split, the edge
//! pass, features, the header); the readers they share with `ogb_hetero/` and
//! `ogb_link.rs` in gz.rs (gzip lines, counts, node ids), npz.rs, labels.rs, split.rs and
//! features.rs.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{Role, SectionEntry, MAX_NODES};
use crate::store::import::{
    limits, sorted_entries, write_no_features, write_roles, ImportReport, TrainGraphMode,
};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

mod features;
mod gz;
mod labels;
mod npz;
mod split;

pub(crate) use features::write_features_csv;
use features::write_features_npz;
pub(crate) use gz::{node_id, read_count, GzLines};
use labels::{read_labels_csv, read_labels_npz, OgbLabels};
use npz::{for_each_f64, npz_count, npz_member, open_npz, required};
pub(crate) use split::{choose_split, read_split_into};
use split::{read_split, require_training_nodes};

/// Options of the OGB importer.
#[derive(Debug, Clone)]
pub struct OgbOptions {
    /// The split's directory name under `split/` (default: the only one).
    pub split: Option<String>,
    /// The training graph: [`TrainGraphMode::Full`] (the default: OGB's node-property
    /// protocol is transductive) or [`TrainGraphMode::Induce`]; OGB gives no training
    /// graph, so [`TrainGraphMode::Given`] is an error.
    pub train_graph: TrainGraphMode,
}

impl Default for OgbOptions {
    fn default() -> Self {
        OgbOptions {
            split: None,
            train_graph: TrainGraphMode::Full,
        }
    }
}

/// Which of OGB's layouts a dataset directory uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OgbLayout {
    /// `raw/*.csv.gz`.
    Csv,
    /// `raw/data.npz` and `raw/node-label.npz`.
    Binary,
    /// A heterogeneous dataset in csv.gz (ogbn-mag's layout: `raw/num-node-dict.csv.gz`,
    /// `raw/relations/`, per-type features, labels and splits), imported as a typed store
    /// (issue 57, `ogb_hetero/`).
    Hetero,
}

/// What an OGB import did.
#[derive(Debug, Clone)]
pub struct OgbReport {
    /// Counts and time, as every importer reports them.
    pub report: ImportReport,
    /// The layout read.
    pub layout: OgbLayout,
    /// The split used.
    pub split: String,
    /// Things ignored or adapted (extra files, NaN tasks, split nodes without a positive
    /// task), one sentence each.
    pub notes: Vec<String>,
}

/// Files of `raw/` that the importer reads (or knows are optional).
const KNOWN_RAW: [&str; 7] = [
    "edge.csv.gz",
    "num-node-list.csv.gz",
    "num-edge-list.csv.gz",
    "node-feat.csv.gz",
    "node-label.csv.gz",
    "data.npz",
    "node-label.npz",
];

/// Lines between two updates of a progress bar (one per line cost 8 % of an import).
pub(super) const PROGRESS_EVERY: u64 = 1 << 16;

// ---------------------------------------------------------------- import

/// Refuses heterogeneous layouts and lists `raw/`'s files the importer does not read.
fn survey_raw(raw: &Path) -> Result<Vec<String>, StoreError> {
    if !raw.is_dir() {
        return Err(StoreError::input(
            raw,
            "not found: expected an OGB dataset directory (raw/, split/)",
        ));
    }
    let mut extra = Vec::new();
    let entries = sorted_entries(raw)?;
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if KNOWN_RAW.contains(&name.as_str()) && e.path().is_dir() {
            return Err(StoreError::input(
                raw.join(&name),
                "a directory, expected a file",
            ));
        }
        let hetero = e.path().is_dir() || name.starts_with("triplet-type-list");
        if hetero {
            return Err(StoreError::input(
                raw.join(&name),
                "part of a heterogeneous dataset (ogbn-mag's layout: raw/relations/, raw/node-feat/<type>/), but raw/num-node-dict.csv.gz, which a heterogeneous dataset starts from, is missing",
            ));
        }
        if !KNOWN_RAW.contains(&name.as_str()) {
            extra.push(name);
        }
    }
    Ok(extra)
}

/// The homogeneous layouts (what [`import_homogeneous`] reads).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Homogeneous {
    Csv,
    Binary,
}

/// What an OGB import refuses before reading anything (either layout: [`import_ogb`](super::import_ogb)).
pub(super) fn check_ogb_input(dir: &Path, opts: &OgbOptions) -> Result<(), StoreError> {
    if !dir.is_dir() {
        return Err(StoreError::input(
            dir,
            "not a directory (expected an OGB dataset directory)",
        ));
    }
    if opts.train_graph == TrainGraphMode::Given {
        return Err(StoreError::Argument {
            what: "--train-graph given: an OGB dataset gives no training graph, expected full or induce".into(),
        });
    }
    Ok(())
}

/// Imports a homogeneous OGB node-property-prediction dataset (checked by
/// [`check_ogb_input`]) in `dir` into a new store at `out`; [`import_ogb`](super::import_ogb) picks the layout.
pub(super) fn import_homogeneous(
    dir: &Path,
    out: &Path,
    opts: &OgbOptions,
    force: bool,
    progress: &Progress,
) -> Result<OgbReport, StoreError> {
    let start = Instant::now();
    let raw = dir.join("raw");
    let extra = survey_raw(&raw)?;
    let mut notes: Vec<String> = extra
        .iter()
        .map(|f| format!("raw/{f} ignored (not read by import ogb)"))
        .collect();
    // `exists`, not `is_file`: a directory or a device in a file's place is an error
    // naming it (when read), never taken for an absent optional file.
    let layout = if raw.join("data.npz").exists() {
        Homogeneous::Binary
    } else {
        Homogeneous::Csv
    };
    let (n, n_edges) = counts(&raw, layout)?;

    let (labels, split_name, roles) = labels_and_split(dir, &raw, layout, opts, n, &mut notes)?;

    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let mut builder =
        CsrBuilder::new(&scratch, n, n_edges.saturating_mul(2), DEFAULT_BUCKET_BYTES)?;
    push_edges(&raw, layout, (n, n_edges), &scratch, &mut builder, progress)?;
    let mode = opts.train_graph;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let graph = build::write_graph(&w, builder, None, &is_train, progress)?;

    let (n_features, feats) = features(&w, &raw, layout, n, &mut notes)?;
    let report = ImportReport::new(n, &graph, start);
    let meta = Meta {
        n_nodes: n,
        n_features,
        n_classes: labels.table.n_classes,
        label_kind: labels.table.kind,
        train_graph: mode.stored(),
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import ogb {} --split {split_name} --train-graph {}",
            dir.display(),
            mode.word()
        ),
    };
    let header = build::header(
        meta,
        graph,
        feats,
        labels.table.write(&w)?,
        write_roles(&w, &roles)?,
    );
    w.commit(&header, |_| Ok(()))?;
    Ok(OgbReport {
        report: ImportReport {
            seconds: start.elapsed().as_secs_f64(),
            ..report
        },
        layout: match layout {
            Homogeneous::Csv => OgbLayout::Csv,
            Homogeneous::Binary => OgbLayout::Binary,
        },
        split: split_name,
        notes,
    })
}

/// The dataset's node and edge counts, N checked before anything in proportion to it is
/// allocated: against the u32 ids, the label file's length and memory.
fn counts(raw: &Path, layout: Homogeneous) -> Result<(u64, u64), StoreError> {
    let data_npz = raw.join("data.npz");
    let (n, n_edges) = match layout {
        Homogeneous::Csv => (
            read_count(&raw.join("num-node-list.csv.gz"))?,
            read_count(&raw.join("num-edge-list.csv.gz"))?,
        ),
        Homogeneous::Binary => {
            let mut npz = open_npz(&data_npz)?;
            (
                npz_count(&mut npz, &data_npz, "num_nodes_list")?,
                npz_count(&mut npz, &data_npz, "num_edges_list")?,
            )
        }
    };
    if n > MAX_NODES {
        return Err(StoreError::input(
            raw,
            format!("{n} nodes exceed the u32 index limit {MAX_NODES}"),
        ));
    }
    // Before anything in proportion to N is allocated: N against the label file's real
    // length (one row per node; issue 55: num-node-list of 4e9 beside tiny files aborted)
    // and against memory.
    let count_path = match layout {
        Homogeneous::Csv => raw.join("num-node-list.csv.gz"),
        Homogeneous::Binary => data_npz.clone(),
    };
    if layout == Homogeneous::Csv {
        let p = raw.join("node-label.csv.gz");
        if let Ok(m) = std::fs::metadata(&p) {
            // At least a gzip file's 18 bytes of header and trailer: a shorter file is
            // refused by the reader with its own message.
            let most = limits::max_gzip_lines(m.len().max(18));
            if n > most {
                return Err(StoreError::input(
                    &count_path,
                    format!(
                        "N = {n} nodes, but {} ({} bytes) decodes to at most {most} lines, expected one label row per node",
                        p.display(),
                        m.len()
                    ),
                ));
            }
        }
    }
    limits::check_memory(
        &count_path,
        &format!("the label and role tables of N = {n} nodes"),
        u128::from(n) * limits::TABLE_BYTES_PER_NODE,
    )?;
    Ok((n, n_edges))
}

/// The labels and the split (its name and the roles): a split node's label must not be
/// nan, split nodes without a positive task leave the split (with notes), and some
/// training node must remain.
fn labels_and_split(
    dir: &Path,
    raw: &Path,
    layout: Homogeneous,
    opts: &OgbOptions,
    n: u64,
    notes: &mut Vec<String>,
) -> Result<(OgbLabels, String, Vec<u8>), StoreError> {
    let nu = n as usize;
    let (labels_path, labels) = match layout {
        Homogeneous::Csv => {
            let p = raw.join("node-label.csv.gz");
            let l = read_labels_csv(&p, nu)?;
            (p, l)
        }
        Homogeneous::Binary => {
            let p = raw.join("node-label.npz");
            let l = read_labels_npz(&p, nu)?;
            (p, l)
        }
    };
    let (split_name, split_dir) =
        choose_split(dir, opts.split.as_deref(), "{train,valid,test}.csv.gz")?;
    let mut roles = read_split(&split_dir, n)?;
    if let Some(v) = (0..nu).find(|&v| roles[v] != Role::None as u8 && labels.missing[v]) {
        return Err(StoreError::input(
            &labels_path,
            format!(
                "node {v} is in split {split_name:?} ({:?}) but its label is nan",
                Role::from_byte(roles[v]).unwrap()
            ),
        ));
    }
    if labels.partial_nan_rows > 0 {
        notes.push(format!(
            "{} nodes have some (not all) tasks nan; those tasks are stored as 0 (a multi-label row has no \"unknown\")",
            labels.partial_nan_rows
        ));
    }
    let mut dropped = 0u64;
    for (v, r) in roles.iter_mut().enumerate() {
        if *r != Role::None as u8 && !labels.table.is_labelled(v) {
            *r = Role::None as u8;
            dropped += 1;
        }
    }
    if dropped > 0 {
        notes.push(format!(
            "{dropped} split nodes have no positive task; the store counts such a node unlabelled, so they are left out of the split"
        ));
    }
    require_training_nodes(&split_dir, &roles)?;
    Ok((labels, split_name, roles))
}

/// The edge pass: every edge pushed both ways into `builder`, its count checked against
/// num-edge-list.
fn push_edges(
    raw: &Path,
    layout: Homogeneous,
    (n, n_edges): (u64, u64),
    scratch: &Path,
    builder: &mut CsrBuilder,
    progress: &Progress,
) -> Result<(), StoreError> {
    let data_npz = raw.join("data.npz");
    let bar = progress.ticker(n_edges, "edges", "edges");
    let edges_path;
    let seen = match layout {
        Homogeneous::Csv => {
            edges_path = raw.join("edge.csv.gz");
            let mut lines = GzLines::open(&edges_path)?;
            let mut seen = 0u64;
            while lines.advance()? {
                let l = lines.line();
                let mut it = l.split(',');
                let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                    return Err(lines.err(format!("expected \"src,dst\", got {l:?}")));
                };
                let u = node_id(&lines, a, n, "source node")?;
                let v = node_id(&lines, b, n, "destination node")?;
                builder.push(u, v)?;
                if u != v {
                    builder.push(v, u)?;
                }
                seen += 1;
                if seen.is_multiple_of(PROGRESS_EVERY) {
                    bar.inc(PROGRESS_EVERY);
                }
            }
            bar.inc(seen % PROGRESS_EVERY);
            seen
        }
        Homogeneous::Binary => {
            edges_path = data_npz.clone();
            push_edge_index(&data_npz, scratch, n, builder, &bar)?
        }
    };
    bar.finish();
    if seen != n_edges {
        return Err(StoreError::input(
            &edges_path,
            format!("{seen} edges, expected {n_edges} as num-edge-list says"),
        ));
    }
    Ok(())
}

/// The features section (none when the dataset has no features, with a note).
fn features(
    w: &StoreWriter,
    raw: &Path,
    layout: Homogeneous,
    n: u64,
    notes: &mut Vec<String>,
) -> Result<(u64, SectionEntry), StoreError> {
    let data_npz = raw.join("data.npz");
    let (n_features, feats) = match layout {
        Homogeneous::Csv => {
            let p = raw.join("node-feat.csv.gz");
            if p.exists() {
                write_features_csv(w, &p, n)?
            } else {
                (0, write_no_features(w)?)
            }
        }
        Homogeneous::Binary => write_features_npz(w, &data_npz, n)?,
    };
    if n_features == 0 {
        notes.push(
            match layout {
                Homogeneous::Csv => {
                    "no raw/node-feat.csv.gz: the store has no node features (F = 0)"
                }
                Homogeneous::Binary => {
                    "no node_feat in raw/data.npz: the store has no node features (F = 0)"
                }
            }
            .to_string(),
        );
    }
    Ok((n_features, feats))
}

/// Pushes `edge_index` (2 × E, C order) of `data.npz` both ways: the sources are spooled
/// to a scratch file (4 bytes each) and read back beside the destinations. Returns E.
fn push_edge_index(
    path: &Path,
    scratch: &Path,
    n: u64,
    builder: &mut CsrBuilder,
    bar: &crate::progress::Ticker,
) -> Result<u64, StoreError> {
    let mut npz = open_npz(path)?;
    let npy = required(
        npz_member(&mut npz, path, "edge_index")?,
        path,
        "edge_index",
    )?;
    let e = match npy.shape() {
        [2, e] => *e,
        s => {
            return Err(StoreError::input(
                path,
                format!("member edge_index: shape expected (2, E), got {s:?}"),
            ))
        }
    };
    let spool = scratch.join("ogb-sources.u32");
    let file = File::create(&spool).map_err(|e| StoreError::io(&spool, "create", e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut back: Option<BufReader<File>> = None;
    let id = |i: u64, x: f64| -> Result<u32, StoreError> {
        if x < 0.0 || x.fract() != 0.0 || x >= n as f64 {
            return Err(StoreError::input(
                path,
                format!(
                    "member edge_index[{}, {}] = {x}: node id out of range, expected 0..{n} (num_nodes_list)",
                    i / e.max(1),
                    i % e.max(1)
                ),
            ));
        }
        Ok(x as u32)
    };
    for_each_f64(npy, path, "edge_index", |i, x| {
        let v = id(i, x)?;
        if i < e {
            return out
                .write_all(&v.to_le_bytes())
                .map_err(|err| StoreError::io(&spool, "write", err));
        }
        if back.is_none() {
            out.flush()
                .map_err(|err| StoreError::io(&spool, "write", err))?;
            let f = File::open(&spool).map_err(|err| StoreError::io(&spool, "open", err))?;
            back = Some(BufReader::with_capacity(1 << 20, f));
        }
        let mut b = [0u8; 4];
        back.as_mut()
            .expect("opened above")
            .read_exact(&mut b)
            .map_err(|err| StoreError::io(&spool, "read", err))?;
        let u = u32::from_le_bytes(b);
        builder.push(u, v)?;
        if u != v {
            builder.push(v, u)?;
        }
        if (i - e + 1).is_multiple_of(PROGRESS_EVERY) {
            bar.inc(PROGRESS_EVERY);
        }
        Ok(())
    })?;
    bar.inc(e % PROGRESS_EVERY);
    drop(back);
    drop(out);
    let _ = std::fs::remove_file(&spool);
    Ok(e)
}
