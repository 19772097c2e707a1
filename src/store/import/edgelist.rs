//! `import edgelist FILE`: whitespace-separated edge lists.
//!
//! One edge per line: two node ids, then anything (weights, timestamps) which is ignored,
//! except the column named by `time_column` (1-based; 3 or more): an integer time per
//! edge (seconds, days, years: any i64), stored as the edge times (`full.time`); an edge
//! listed more than once (both directions, duplicates) keeps its **earliest** time. Blank
//! lines and lines starting with `#` or `%` are comments. Duplicates and self loops
//! are dropped and counted. By default the list must already hold both directions of every
//! edge (an asymmetric list is an error naming an example); `symmetrize` adds every reverse
//! entry. The file is read twice (once for the node count unless given) and edges go
//! through the external CSR builder, so memory does not grow with the number of edges.
//!
//! Node ids: without `remap`, ids are non-negative integers used as they are, and the
//! store has largest id + 1 nodes. So that a stray large id cannot make the importer
//! allocate (and write) arrays of billions of nodes, an id is refused, before anything
//! is allocated, when largest id + 1 > [`SPARSE_FACTOR`] × edge lines + [`SPARSE_SLACK`]
//! (unless `--nodes` says the count): a list with ids 1..N where most nodes have an edge
//! has at least N/2 lines, far inside the bound. With `remap`, any token is an id (numbers,
//! strings, compared as text: `7` and `07` differ); ids are numbered 0..N in order of first
//! appearance (a streaming pass needs no sort, and the order is the file's), the table of
//! distinct ids being the only memory that grows with N; the mapping is written inside the
//! store as [`IDS_FILE`] (`store id <TAB> original id` per line), published with the store
//! by its atomic rename. Labels and roles given by original id (`class_map.json` keys,
//! `role.json` lists) are translated through it; `.npy` inputs give rows by position, which
//! cannot follow a remapping, so they are refused with `remap`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{Role, MAX_NODES};
use crate::store::gen::random_role;
use crate::store::import::{
    commit_import, limits, read_class_map_with, read_labels, read_roles_with, require_labels,
    write_features_npy, write_no_features, IdMap, ImportReport, LabelTable, TrainGraphMode,
};

/// Without `remap`, ids may reach up to this many times the number of edge lines…
pub const SPARSE_FACTOR: u64 = 16;
/// …plus this many (small lists with a few isolated low ids).
pub const SPARSE_SLACK: u64 = 1024;
/// The id mapping's file inside a store imported with `remap`.
pub use crate::store::format::IDS_FILE;
use crate::store::time::TimeSpool;
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
    /// The training graph: [`TrainGraphMode::Full`] (the default, transductive) or
    /// [`TrainGraphMode::Induce`] (edges with both ends in training); an edge list gives no
    /// training graph, so [`TrainGraphMode::Given`] is an error.
    pub train_graph: TrainGraphMode,
    /// Number the ids (any tokens) 0..N in order of first appearance; the mapping is
    /// written to [`IDS_FILE`] in the store.
    pub remap: bool,
    /// The column (1-based, ≥ 3) holding each edge's time, an integer: stored as the edge
    /// times (an edge listed more than once keeps the earliest). `None`: no times.
    pub time_column: Option<usize>,
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
            train_graph: TrainGraphMode::Full,
            remap: false,
            time_column: None,
        }
    }
}

/// Calls `each(line_no, u, v, t)` with the two id tokens of every edge line of `path`
/// and, with `time_column` (1-based), its time (refused when missing or not an integer).
fn scan(
    path: &Path,
    time_column: Option<usize>,
    mut each: impl FnMut(u64, &str, &str, Option<i64>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = String::new();
    let mut line_no = 0u64;
    loop {
        line.clear();
        // Bounded: a hostile line cannot make the reader hold more than the limit.
        let got = (&mut reader)
            .take(limits::MAX_LINE_BYTES as u64 + 1)
            .read_line(&mut line)
            .map_err(|e| {
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
        if got > limits::MAX_LINE_BYTES {
            return Err(StoreError::input(
                path,
                format!(
                    "line {line_no}: longer than {} bytes, expected an edge line (two ids)",
                    limits::MAX_LINE_BYTES
                ),
            ));
        }
        // A UTF-8 byte-order mark (Windows editors) is not part of the first id.
        let t = match line.strip_prefix('\u{feff}') {
            Some(rest) if line_no == 1 => rest.trim(),
            _ => line.trim(),
        };
        if t.is_empty() || t.starts_with('#') || t.starts_with('%') {
            continue;
        }
        let mut tok = t.split_whitespace();
        let (Some(u), Some(v)) = (tok.next(), tok.next()) else {
            return Err(StoreError::input(
                path,
                format!("line {line_no}: expected two node ids, got {t:?}"),
            ));
        };
        let t = match time_column {
            Some(c) => Some(time_token(path, line_no, c, tok.nth(c - 3))?),
            None => None,
        };
        each(line_no, u, v, t)?;
    }
}

/// The time of an edge line: column `c` (1-based), an integer.
fn time_token(path: &Path, line_no: u64, c: usize, tok: Option<&str>) -> Result<i64, StoreError> {
    let Some(s) = tok else {
        return Err(StoreError::input(
            path,
            format!(
                "line {line_no}: no column {c} (--time-column {c}: every edge line needs its time)"
            ),
        ));
    };
    s.parse::<i64>().map_err(|_| {
        StoreError::input(
            path,
            format!("line {line_no}: column {c} (--time-column) {s:?} is not an integer time"),
        )
    })
}

/// A numeric id token, or an error naming the line and suggesting `--remap`.
fn numeric(path: &Path, line_no: u64, what: &str, s: &str) -> Result<u64, StoreError> {
    s.parse::<u64>().map_err(|_| {
        StoreError::input(
            path,
            format!("line {line_no}: {what} node id {s:?} is not a non-negative integer (pass --remap to number string or sparse ids 0..N)"),
        )
    })
}

/// The ids of a `remap` import: token → store id, in order of first appearance.
struct Remap {
    ids: HashMap<String, u32>,
}

impl Remap {
    fn id(&mut self, path: &Path, line_no: u64, s: &str) -> Result<u32, StoreError> {
        if let Some(&k) = self.ids.get(s) {
            return Ok(k);
        }
        let k = self.ids.len() as u64;
        if k >= MAX_NODES {
            return Err(StoreError::input(
                path,
                format!(
                    "line {line_no}: more than {MAX_NODES} distinct node ids (the u32 index limit)"
                ),
            ));
        }
        self.ids.insert(s.to_string(), k as u32);
        Ok(k as u32)
    }

    /// The original ids by store id.
    fn by_id(&self) -> Vec<&str> {
        let mut v = vec![""; self.ids.len()];
        for (s, &k) in &self.ids {
            v[k as usize] = s;
        }
        v
    }
}

/// Refuses inputs given by row position (`.npy`) when ids are remapped.
fn refuse_positional(flag: &str, p: &Option<PathBuf>) -> Result<(), StoreError> {
    match p {
        Some(p) if p.extension().and_then(|e| e.to_str()) != Some("json") => Err(StoreError::input(
            p,
            format!("{flag} with --remap: this file gives rows by position, which cannot follow remapped ids; give labels and roles as class_map.json / role.json keyed by the original ids, or import without --remap"),
        )),
        _ => Ok(()),
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
    check_options(opts)?;
    // Pass 1: the node count (and the remapping), before anything ∝ N is allocated.
    let (n, lines, remap) = first_pass(path, opts)?;
    let nu = n as usize;
    let lookup = |s: &str| {
        remap
            .as_ref()
            .and_then(|r| r.ids.get(s))
            .map(|&k| k as usize)
    };
    let map: Option<IdMap<'_>> = remap.as_ref().map(|_| &lookup as IdMap<'_>);
    let (labels, roles) = labels_and_roles(path, opts, n, map)?;

    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let expected = lines * if opts.symmetrize { 2 } else { 1 };
    let mut builder = CsrBuilder::new(&scratch, n, expected, DEFAULT_BUCKET_BYTES)?;
    let bar = progress.ticker(lines, "edges", "lines");
    let id = |line_no: u64, what: &str, s: &str| -> Result<u32, StoreError> {
        match map {
            Some(map) => map(s).map(|k| k as u32).ok_or_else(|| {
                StoreError::input(path, format!("line {line_no}: id {s:?} was not seen by the first pass: the file changed while being read"))
            }),
            None => {
                let x = numeric(path, line_no, what, s)?;
                // n is fixed by the first pass; a file that changed since must not index past it.
                if x >= n {
                    return Err(StoreError::input(path, format!("line {line_no}: node id {x} out of range for {n} nodes (the file changed while being read?)")));
                }
                Ok(x as u32)
            }
        }
    };
    let mut spool = match opts.time_column {
        Some(_) => Some(TimeSpool::create(&w)?),
        None => None,
    };
    scan(path, opts.time_column, |line_no, u, v, t| {
        let (u, v) = (id(line_no, "first", u)?, id(line_no, "second", v)?);
        builder.push(u, v)?;
        if opts.symmetrize {
            builder.push(v, u)?;
        }
        if let (Some(spool), Some(t)) = (&mut spool, t) {
            spool.push(u, v, t)?;
        }
        bar.inc(1);
        Ok(())
    })?;
    bar.finish();
    let mode = opts.train_graph;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let graph = build::write_graph(&w, builder, None, &is_train, progress)?;
    let edge_time = match spool {
        Some(spool) => Some(spool.write(&w, &graph, None, path)?),
        None => None,
    };
    let (n_features, feats) = match &opts.features {
        Some(p) => write_features_npy(&w, p, nu, opts.standardize, &roles)?,
        None => (0, write_no_features(&w)?),
    };
    if let Some(r) = &remap {
        write_ids(&w, &r.by_id())?;
    }
    let meta = Meta {
        n_nodes: n,
        n_features,
        n_classes: labels.n_classes,
        label_kind: labels.kind,
        train_graph: mode.stored(),
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import edgelist {}{}{}{} --train-graph {}",
            path.display(),
            if opts.symmetrize { " --symmetrize" } else { "" },
            if opts.remap { " --remap" } else { "" },
            opts.time_column
                .map_or(String::new(), |c| format!(" --time-column {c}")),
            mode.word()
        ),
    };
    let asymmetric = |u: u32, v: u32, count: u64| {
        StoreError::input(path, format!(
            "edge list is not symmetric: {count} entries lack their reverse, e.g. {u} {v} is listed but {v} {u} is not; pass --symmetrize to add reverse edges"
        ))
    };
    let check: Option<&dyn Fn(u32, u32, u64) -> StoreError> =
        (!opts.symmetrize).then_some(&asymmetric);
    commit_import(
        w, meta, graph, feats, &labels, &roles, start, check, edge_time,
    )
}

/// Writes [`IDS_FILE`] into the store being written: a comment line, then `k<TAB>original`
/// for every store id k, fsynced (the store's rename publishes it).
fn write_ids(w: &StoreWriter, originals: &[&str]) -> Result<(), StoreError> {
    let (path, f) = w.aux_file(IDS_FILE)?;
    let io = |e| StoreError::io(&path, "write", e);
    let mut out = BufWriter::with_capacity(1 << 20, f);
    writeln!(
        out,
        "# store id\toriginal id (saintflow import edgelist --remap)"
    )
    .map_err(io)?;
    for (k, s) in originals.iter().enumerate() {
        writeln!(out, "{k}\t{s}").map_err(io)?;
    }
    let f = out.into_inner().map_err(|e| io(e.into_error()))?;
    f.sync_all().map_err(|e| StoreError::io(&path, "fsync", e))
}

/// The options' own checks, before the file is read.
fn check_options(opts: &EdgeListOptions) -> Result<(), StoreError> {
    crate::store::gen::check_split(opts.split)?;
    if opts.train_graph == TrainGraphMode::Given {
        return Err(StoreError::Argument {
            what:
                "--train-graph given: an edge list gives no training graph, expected full or induce"
                    .into(),
        });
    }
    if let Some(c) = opts.time_column {
        if c < 3 {
            return Err(StoreError::argument(format!(
                "--time-column {c}: columns 1 and 2 are the node ids, expected 3 or more"
            )));
        }
    }
    if opts.remap {
        refuse_positional("--features", &opts.features)?;
        refuse_positional("--labels", &opts.labels)?;
        refuse_positional("--roles", &opts.roles)?;
    }
    Ok(())
}

/// Pass 1: the node count N (from `--nodes` or the largest id, which must not be far
/// beyond the lines without `--remap`), the edge lines, and the remapping; N checked
/// against the u32 ids and, before anything ∝ N is allocated, memory.
fn first_pass(
    path: &Path,
    opts: &EdgeListOptions,
) -> Result<(u64, u64, Option<Remap>), StoreError> {
    let (mut max_id, mut max_line, mut lines) = (None::<u64>, 0u64, 0u64);
    let mut remap = opts.remap.then(|| Remap {
        ids: HashMap::new(),
    });
    scan(path, opts.time_column, |line_no, u, v, _| {
        let (u, v) = match &mut remap {
            Some(r) => (
                u64::from(r.id(path, line_no, u)?),
                u64::from(r.id(path, line_no, v)?),
            ),
            None => (
                numeric(path, line_no, "first", u)?,
                numeric(path, line_no, "second", v)?,
            ),
        };
        if max_id.is_none_or(|m| u.max(v) > m) {
            (max_id, max_line) = (Some(u.max(v)), line_no);
        }
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
        (None, Some(m)) => m.saturating_add(1),
        (None, None) => 0,
    };
    if n == 0 {
        return Err(StoreError::input(
            path,
            "no edge lines (the file is empty or only comments) and no --nodes: the store would have 0 nodes",
        ));
    }
    if let (None, Some(m)) = (opts.n_nodes, max_id) {
        let bound = SPARSE_FACTOR
            .saturating_mul(lines)
            .saturating_add(SPARSE_SLACK);
        if m >= bound {
            return Err(StoreError::input(
                path,
                format!(
                    "line {max_line}: node id {m} is far beyond the {lines} edge lines (ids are used as row numbers, so the store would have {} nodes; the limit without --remap is {SPARSE_FACTOR} × lines + {SPARSE_SLACK} = {bound}): pass --remap to number the ids 0..N, or --nodes to insist",
                    m.saturating_add(1)
                ),
            ));
        }
    }
    if n > MAX_NODES {
        return Err(StoreError::input(
            path,
            format!("{n} nodes exceed the u32 index limit {MAX_NODES}"),
        ));
    }
    // `--nodes` is trusted as a count, not as an allocation (issue 55: --nodes 4e9 beside
    // a tiny list aborted): the per-node tables must fit in memory.
    limits::check_memory(
        path,
        &format!("the label and role tables of N = {n} nodes"),
        u128::from(n) * limits::TABLE_BYTES_PER_NODE,
    )?;
    Ok((n, lines, remap))
}

/// The labels (by original id under `--remap`) and the roles: given, or a random split of
/// the labelled nodes, or none.
fn labels_and_roles(
    path: &Path,
    opts: &EdgeListOptions,
    n: u64,
    map: Option<IdMap<'_>>,
) -> Result<(LabelTable, Vec<u8>), StoreError> {
    let nu = n as usize;
    let labels = match (&opts.labels, map) {
        (Some(p), Some(map)) => read_class_map_with(p, nu, Some(map))?,
        (Some(p), None) => read_labels(p, nu)?,
        (None, _) => LabelTable::none(nu),
    };
    // A random split covers only labelled nodes: an unlabelled node cannot be trained or
    // scored on.
    let roles: Vec<u8> = match (&opts.roles, &opts.labels) {
        (Some(p), _) => read_roles_with(p, nu, map)?,
        (None, Some(_)) => (0..nu)
            .map(|v| match labels.is_labelled(v) {
                true => random_role(opts.seed, opts.split, v as u64) as u8,
                false => Role::None as u8,
            })
            .collect(),
        (None, None) => limits::filled(path, "roles", n, Role::None as u8)?,
    };
    if let Some(p) = &opts.labels {
        require_labels(p, &labels, &roles)?;
    }
    Ok((labels, roles))
}
