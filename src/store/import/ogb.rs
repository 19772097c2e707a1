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
//! `raw/node-feat/<type>/`) are imported as typed stores by `ogb_hetero.rs` (issue 57);
//! graph-property datasets (several graphs in `num-node-list`) are refused. Extra node or
//! edge files (`node_year.csv.gz`, `edge-feat.csv.gz`) are ignored with a note.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use flate2::read::MultiGzDecoder;

use crate::npy::{open_npy, plain_dtype, VettedNpy};
use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{
    Dtype, LabelKind, Role, SectionEntry, SectionId, MAX_CLASSES, MAX_NODES, NO_LABEL,
};
use crate::store::import::{
    limits, write_no_features, write_roles, ImportReport, LabelTable, TrainGraphMode,
};
use crate::store::writer::{SectionWriter, StoreWriter};
use crate::store::StoreError;

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
    /// (issue 57, `ogb_hetero.rs`).
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

// ---------------------------------------------------------------- gzip lines

/// The lines of a gzip-compressed text file, decoded as a stream: a thread inflates the
/// file ahead in [`INFLATE_BLOCK`] blocks (at most [`INFLATE_AHEAD`] waiting) while the
/// caller parses, so decoding and parsing take a core each. Memory stays bounded by the
/// blocks in flight, whatever the file's size.
pub(super) struct GzLines {
    path: PathBuf,
    reader: BufReader<Inflated>,
    buf: String,
    line_no: u64,
}

/// Reads until `buf` is full or the end; the count read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Bytes per block the inflating thread hands over.
const INFLATE_BLOCK: usize = 1 << 20;

/// Blocks decoded ahead of the parser at most.
const INFLATE_AHEAD: usize = 4;

/// The decoded bytes of a gzip file, produced by a thread (see [`GzLines`]). Dropped early
/// (an error in a line), it closes the channel and the thread ends at its next block;
/// dropped at all, it waits for the thread, so no import leaves a decoder running behind
/// it (the 10-minute `ogb` fuzz run caught one still holding its buffers at the leak check).
struct Inflated {
    /// None once dropped (the thread's next send fails).
    rx: Option<std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    block: Vec<u8>,
    at: usize,
    /// The end of the stream was read (every later read is the end again).
    ended: bool,
}

impl Inflated {
    fn spawn(file: File) -> Inflated {
        let (tx, rx) = std::sync::mpsc::sync_channel(INFLATE_AHEAD);
        let thread = std::thread::spawn(move || {
            let mut gz = MultiGzDecoder::new(BufReader::with_capacity(1 << 20, file));
            loop {
                let mut block = vec![0u8; INFLATE_BLOCK];
                let mut len = 0;
                let result = loop {
                    match gz.read(&mut block[len..]) {
                        Ok(0) => break Ok(()),
                        Ok(k) => {
                            len += k;
                            if len == block.len() {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                block.truncate(len);
                let sent = match result {
                    Ok(()) if len == 0 => {
                        let _ = tx.send(Ok(Vec::new()));
                        return;
                    }
                    Ok(()) => tx.send(Ok(block)),
                    Err(e) => {
                        // The bytes before the error first, so line numbers stay right;
                        // but never an empty block, which the reader takes for the end
                        // (issue 55: an error at a block's start read as end of input).
                        if len > 0 && tx.send(Ok(block)).is_err() {
                            return;
                        }
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if sent.is_err() {
                    return;
                }
            }
        });
        Inflated {
            rx: Some(rx),
            thread: Some(thread),
            block: Vec::new(),
            at: 0,
            ended: false,
        }
    }
}

impl Drop for Inflated {
    fn drop(&mut self) {
        // Closing the channel first makes a thread blocked in `send` return; one decoding
        // a block finishes it (at most INFLATE_BLOCK bytes) and then finds it closed.
        drop(self.rx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Read for Inflated {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            if self.ended {
                return Ok(0);
            }
            let Some(rx) = &self.rx else {
                return Ok(0);
            };
            match rx.recv() {
                Ok(Ok(b)) if b.is_empty() => {
                    self.ended = true;
                    return Ok(0);
                }
                Ok(Ok(b)) => (self.block, self.at) = (b, 0),
                Ok(Err(e)) => return Err(e),
                // The thread sends the end (an empty block) or an error before it ends; a
                // channel closed without either is a thread that died: not the end.
                Err(_) => {
                    return Err(std::io::Error::other(
                        "the decoding thread ended without reaching the end of the stream",
                    ))
                }
            }
        }
        let k = out.len().min(self.block.len() - self.at);
        out[..k].copy_from_slice(&self.block[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

impl GzLines {
    /// Opens a gzip file: a regular file (a directory or a device is refused) that starts
    /// with gzip's magic bytes (an empty or plain-text file is refused: issue 55, a split
    /// file saved as plain text read as zero nodes).
    pub(super) fn open(path: &Path) -> Result<Self, StoreError> {
        let mut f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
        let meta = f.metadata().map_err(|e| StoreError::io(path, "stat", e))?;
        if !meta.is_file() {
            let kind = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            return Err(StoreError::input(
                path,
                format!("{kind}, expected a gzip-compressed file"),
            ));
        }
        let mut magic = [0u8; 2];
        let got = read_full(&mut f, &mut magic).map_err(|e| StoreError::io(path, "read", e))?;
        if got < 2 || magic != [0x1f, 0x8b] {
            let what = match got {
                0 => "an empty file".to_string(),
                _ => format!(
                    "not gzip-compressed (starts with {:?}; a plain-text file?)",
                    String::from_utf8_lossy(&magic[..got])
                ),
            };
            return Err(StoreError::input(
                path,
                format!("{what}, expected a gzip stream (magic 1f 8b)"),
            ));
        }
        f.rewind().map_err(|e| StoreError::io(path, "seek", e))?;
        Ok(GzLines {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 16, Inflated::spawn(f)),
            buf: String::with_capacity(1 << 12),
            line_no: 0,
        })
    }

    /// Reads the next line; false at the end. [`line`](Self::line) then holds it. A line
    /// longer than [`MAX_LINE_BYTES`](limits::MAX_LINE_BYTES) is an error (read no further than the bound), and
    /// so is every decoding error: a damaged, truncated or garbage-followed stream is
    /// never taken for the end of the input.
    pub(super) fn advance(&mut self) -> Result<bool, StoreError> {
        self.buf.clear();
        let got = (&mut self.reader)
            .take(limits::MAX_LINE_BYTES as u64 + 1)
            .read_line(&mut self.buf)
            .map_err(|e| {
                let what = if e.kind() == std::io::ErrorKind::InvalidData {
                    "not valid UTF-8 text".to_string()
                } else {
                    format!("not a valid gzip stream: {e}")
                };
                StoreError::input(&self.path, format!("line {}: {what}", self.line_no + 1))
            })?;
        if got == 0 {
            return Ok(false);
        }
        self.line_no += 1;
        if got > limits::MAX_LINE_BYTES {
            return Err(self.err(format!(
                "a line longer than {} bytes, expected shorter lines (the longest row the importer reads)",
                limits::MAX_LINE_BYTES
            )));
        }
        Ok(true)
    }

    /// The current line without its line ending.
    pub(super) fn line(&self) -> &str {
        self.buf.trim_end_matches(['\n', '\r'])
    }

    /// An error at the current line.
    pub(super) fn err(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::input(&self.path, format!("line {}: {what}", self.line_no))
    }
}

/// A node id field: a non-negative integer below `n`.
pub(super) fn node_id(lines: &GzLines, s: &str, n: u64, what: &str) -> Result<u32, StoreError> {
    let s = s.trim();
    let v: u64 = s.parse().map_err(|_| {
        lines.err(format!(
            "{what} {s:?} is not a node id (a non-negative integer)"
        ))
    })?;
    if v >= n {
        return Err(lines.err(format!(
            "{what} {v} out of range, expected < N = {n} (num-node-list)"
        )));
    }
    Ok(v as u32)
}

/// The one count in `raw/num-node-list.csv.gz` / `raw/num-edge-list.csv.gz`.
pub(super) fn read_count(path: &Path) -> Result<u64, StoreError> {
    let mut lines = GzLines::open(path)?;
    // The first count and how many: a file of a billion counts holds no table.
    let (mut first, mut count) = (None, 0u64);
    while lines.advance()? {
        let t = lines.line().trim();
        if t.is_empty() {
            continue;
        }
        let c: u64 = t
            .parse()
            .map_err(|_| lines.err(format!("expected a count, got {t:?}")))?;
        first.get_or_insert(c);
        count += 1;
    }
    match (first, count) {
        (Some(c), 1) => Ok(c),
        (None, _) => Err(StoreError::input(path, "empty, expected one count")),
        (_, k) => Err(StoreError::input(
            path,
            format!(
                "{k} counts: a graph-property dataset of several graphs; import ogb reads node-property datasets (one graph)"
            ),
        )),
    }
}

// ---------------------------------------------------------------- npz members

/// Opens member `name` of an npz archive, its NPY header vetted; None if absent.
fn npz_member<'a, R: Read + Seek>(
    npz: &'a mut npyz::npz::NpzArchive<R>,
    path: &Path,
    name: &str,
) -> Result<Option<VettedNpy<impl Read + 'a>>, StoreError> {
    if !npz.array_names().any(|n| n == name) {
        return Ok(None);
    }
    let archive_len = std::fs::metadata(path)
        .map_err(|e| StoreError::io(path, "stat", e))?
        .len();
    let file = npz
        .zip_archive()
        .by_name(&npyz::npz::file_name_from_array_name(name))
        .map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
    let bad = |e: String| StoreError::input(path, format!("member {name}: {e}"));
    let total =
        limits::npz_member_len(file.size(), file.compressed_size(), archive_len).map_err(bad)?;
    let npy = open_npy(file, Some(total)).map_err(bad)?;
    if npy.order() != npyz::Order::C {
        return Err(StoreError::input(
            path,
            format!("member {name}: Fortran order, expected C order"),
        ));
    }
    Ok(Some(npy))
}

fn open_npz(path: &Path) -> Result<npyz::npz::NpzArchive<BufReader<File>>, StoreError> {
    npyz::npz::NpzArchive::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StoreError::io(path, "open", e),
        _ => StoreError::input(path, format!("not a valid npz (zip) archive: {e}")),
    })
}

fn required<T>(x: Option<T>, path: &Path, name: &str) -> Result<T, StoreError> {
    x.ok_or_else(|| StoreError::input(path, format!("missing member {name}.npy")))
}

/// Streams a member's elements as f64, calling `each(index, x)` in order.
fn for_each_f64<R: Read>(
    npy: VettedNpy<R>,
    path: &Path,
    name: &str,
    mut each: impl FnMut(u64, f64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let bad = |e: std::io::Error| StoreError::input(path, format!("member {name}: {e}"));
    let t =
        plain_dtype(&npy).map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
    macro_rules! stream {
        ($t:ty) => {{
            let data = npy
                .data::<$t>()
                .map_err(|e| StoreError::input(path, format!("member {name}: {e}")))?;
            for (i, x) in data.enumerate() {
                each(i as u64, x.map_err(bad)? as f64)?;
            }
        }};
    }
    match t.as_str() {
        "<f4" => stream!(f32),
        "<f8" => stream!(f64),
        "<i4" => stream!(i32),
        "<i8" => stream!(i64),
        "<u4" => stream!(u32),
        "|u1" | "<u1" => stream!(u8),
        "|i1" | "<i1" => stream!(i8),
        t => {
            return Err(StoreError::input(
                path,
                format!("member {name}: dtype {t}, expected little-endian float or integer"),
            ))
        }
    }
    Ok(())
}

/// A 1-element count array (`num_nodes_list`, `num_edges_list`).
fn npz_count<R: Read + Seek>(
    npz: &mut npyz::npz::NpzArchive<R>,
    path: &Path,
    name: &str,
) -> Result<u64, StoreError> {
    let npy = required(npz_member(npz, path, name)?, path, name)?;
    // Judged by the shape, before any element is read: several counts are refused
    // without reading (or holding) them.
    let k: u64 = npy.shape().iter().product();
    if k != 1 {
        return Err(StoreError::input(
            path,
            match k {
                0 => format!("member {name}: empty, expected one count"),
                k => format!(
                    "member {name}: {k} counts: a graph-property dataset of several graphs; import ogb reads node-property datasets (one graph)"
                ),
            },
        ));
    }
    let mut count = None;
    for_each_f64(npy, path, name, |_, x| {
        count = Some(x);
        Ok(())
    })?;
    match count {
        Some(c) if c >= 0.0 && c.fract() == 0.0 => Ok(c as u64),
        Some(c) => Err(StoreError::input(
            path,
            format!("member {name}: {c} is not a count, expected a non-negative integer"),
        )),
        None => Err(StoreError::input(
            path,
            format!("member {name}: empty, expected one count"),
        )),
    }
}

// ---------------------------------------------------------------- labels

/// Labels as read, before the split is known.
struct OgbLabels {
    table: LabelTable,
    /// Per node: the label is NaN (single-task) or every task is NaN (multi-task).
    missing: Vec<bool>,
    /// Multi-task rows with some (not all) tasks NaN.
    partial_nan_rows: u64,
}

/// Builds [`OgbLabels`] row by row; the task count T is fixed by the first non-empty row.
struct LabelRows {
    n: usize,
    tasks: Option<usize>,
    single: Vec<u32>,
    multi: Vec<u8>,
    missing: Vec<bool>,
    max_class: Option<u64>,
    partial_nan_rows: u64,
}

/// One label field: Some(value) or None for NaN / empty.
fn label_field(s: &str) -> Result<Option<f64>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("nan") {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_nan() => Ok(None),
        Ok(x) => Ok(Some(x)),
        Err(_) => Err(format!("label {t:?} is not a number")),
    }
}

impl LabelRows {
    fn new(path: &Path, n: usize) -> Result<Self, StoreError> {
        Ok(LabelRows {
            n,
            tasks: None,
            single: Vec::new(),
            multi: Vec::new(),
            missing: limits::filled(path, "label flags", n as u64, true)?,
            max_class: None,
            partial_nan_rows: 0,
        })
    }

    /// Row `v` from its fields (None: an empty row, no label); the error is a bare message.
    fn row(&mut self, v: usize, fields: Option<&[Option<f64>]>) -> Result<(), String> {
        let Some(fields) = fields else {
            return Ok(());
        };
        let t = *self.tasks.get_or_insert(fields.len());
        if self.single.is_empty() && self.multi.is_empty() {
            // Fallible, and the multi-label table checked against memory first: T comes
            // from the input.
            let bytes = self.n as u128 * t.div_ceil(8) as u128;
            if let Some((limit, source)) = crate::machine::allocatable() {
                if t > 1 && bytes > u128::from(limit) {
                    return Err(format!(
                        "{t} label columns: a table of {} for N = {} nodes, expected at most {} ({source})",
                        crate::machine::human(bytes),
                        self.n,
                        crate::machine::human(u128::from(limit))
                    ));
                }
            }
            let no_room = |e: StoreError| match e {
                StoreError::Input { what, .. } => what,
                e => e.to_string(),
            };
            let here = Path::new("labels");
            if t == 1 {
                self.single =
                    limits::filled(here, "table", self.n as u64, NO_LABEL).map_err(no_room)?;
            } else {
                let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
                self.multi = limits::filled(here, "table", bytes, 0u8).map_err(no_room)?;
            }
        }
        if fields.len() != t {
            return Err(format!(
                "{} label columns, expected {t} (as the first labelled row)",
                fields.len()
            ));
        }
        if t == 1 {
            if let Some(c) = fields[0] {
                if c < 0.0 || c.fract() != 0.0 {
                    return Err(format!("class {c}, expected a non-negative integer or nan"));
                }
                // The store's bound, which `check` enforces (issue 55: never write what
                // `check` refuses).
                if c >= MAX_CLASSES as f64 {
                    return Err(format!("class {c} too large, expected < {MAX_CLASSES}"));
                }
                self.single[v] = c as u32;
                self.missing[v] = false;
                self.max_class = Some(self.max_class.map_or(c as u64, |m| m.max(c as u64)));
            }
        } else {
            let r = t.div_ceil(8);
            let mut nan = 0;
            for (j, x) in fields.iter().enumerate() {
                match x {
                    None => nan += 1,
                    Some(x) if *x == 1.0 => self.multi[v * r + j / 8] |= 1 << (j % 8),
                    Some(x) if *x == 0.0 => {}
                    Some(x) => {
                        return Err(format!("task {j}: {x}, expected 0, 1 or nan"));
                    }
                }
            }
            self.missing[v] = nan == t;
            if nan > 0 && nan < t {
                self.partial_nan_rows += 1;
            }
        }
        Ok(())
    }

    fn finish(self) -> OgbLabels {
        let table = match self.tasks {
            None => LabelTable::none(self.n),
            Some(1) => LabelTable {
                kind: LabelKind::Single,
                n_classes: self.max_class.map_or(0, |m| m + 1),
                data: bytemuck::cast_slice(&self.single).to_vec(),
            },
            Some(t) => LabelTable {
                kind: LabelKind::Multi,
                n_classes: t as u64,
                data: self.multi,
            },
        };
        OgbLabels {
            table,
            missing: self.missing,
            partial_nan_rows: self.partial_nan_rows,
        }
    }
}

fn read_labels_csv(path: &Path, n: usize) -> Result<OgbLabels, StoreError> {
    let mut lines = GzLines::open(path)?;
    let mut rows = LabelRows::new(path, n)?;
    let mut fields = Vec::new();
    let mut v = 0usize;
    while lines.advance()? {
        let l = lines.line();
        if v >= n {
            return Err(lines.err(format!(
                "more label rows than the N = {n} nodes of num-node-list"
            )));
        }
        let row = if l.trim().is_empty() {
            None
        } else {
            fields.clear();
            for f in l.split(',') {
                fields.push(label_field(f).map_err(|e| lines.err(e))?);
            }
            Some(fields.as_slice())
        };
        rows.row(v, row).map_err(|e| lines.err(e))?;
        v += 1;
    }
    if v != n {
        return Err(StoreError::input(
            path,
            format!("{v} label rows, expected one per node, N = {n} (num-node-list)"),
        ));
    }
    Ok(rows.finish())
}

fn read_labels_npz(path: &Path, n: usize) -> Result<OgbLabels, StoreError> {
    let mut npz = open_npz(path)?;
    let npy = required(
        npz_member(&mut npz, path, "node_label")?,
        path,
        "node_label",
    )?;
    let t = match npy.shape() {
        [rows] if *rows == n as u64 => 1,
        [rows, t] if *rows == n as u64 && *t > 0 => *t as usize,
        s => {
            return Err(StoreError::input(
                path,
                format!("member node_label: shape expected ({n}, T), got {s:?}"),
            ))
        }
    };
    let mut rows = LabelRows::new(path, n)?;
    let mut fields = Vec::with_capacity(t);
    for_each_f64(npy, path, "node_label", |i, x| {
        fields.push((!x.is_nan()).then_some(x));
        if fields.len() == t {
            let v = (i / t as u64) as usize;
            rows.row(v, Some(&fields)).map_err(|e| {
                StoreError::input(path, format!("member node_label, node {v}: {e}"))
            })?;
            fields.clear();
        }
        Ok(())
    })?;
    Ok(rows.finish())
}

// ---------------------------------------------------------------- split

/// The split's directory: `opts.split`, else the only one under `split/`.
/// `files` names the split's files in the message for a dataset without one.
pub(super) fn choose_split(
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
fn read_split(dir: &Path, n: u64) -> Result<Vec<u8>, StoreError> {
    let mut roles = limits::filled(dir, "roles", n, Role::None as u8)?;
    read_split_into(dir, &mut roles, |lines, l| {
        node_id(lines, l, n, "node").map(|v| (v as usize, u64::from(v)))
    })?;
    Ok(roles)
}

/// The roles of `train.csv.gz`, `valid.csv.gz`, `test.csv.gz` in `dir` into `roles`: each
/// non-empty line a node, `id` giving its index in `roles` and its id as the file names it
/// (errors name that); a node in two files, or twice in one, is an error.
pub(super) fn read_split_into(
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
fn require_training_nodes(dir: &Path, roles: &[u8]) -> Result<(), StoreError> {
    if !roles.contains(&(Role::Train as u8)) {
        return Err(StoreError::input(
            dir.join("train.csv.gz"),
            "no training nodes (after leaving out split nodes without a label), expected at least one",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- features

/// Streams f32 rows into the features section, checking finiteness.
struct FeatureSink {
    section: SectionWriter,
    buf: Vec<f32>,
}

impl FeatureSink {
    fn new(w: &StoreWriter) -> Result<Self, StoreError> {
        Ok(FeatureSink {
            section: w.section(SectionId::Features, Dtype::F32)?,
            buf: Vec::with_capacity(1 << 16),
        })
    }

    fn push(&mut self, x: f32) -> Result<(), StoreError> {
        self.buf.push(x);
        if self.buf.len() == self.buf.capacity() {
            self.section.write_f32s(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<SectionEntry, StoreError> {
        self.section.write_f32s(&self.buf)?;
        self.section.finish()
    }
}

pub(super) fn write_features_csv(
    w: &StoreWriter,
    path: &Path,
    n: u64,
) -> Result<(u64, SectionEntry), StoreError> {
    let mut lines = GzLines::open(path)?;
    let mut sink = FeatureSink::new(w)?;
    let mut f = None::<u64>;
    let mut rows = 0u64;
    while lines.advance()? {
        let l = lines.line();
        if rows >= n {
            return Err(lines.err(format!(
                "more feature rows than the N = {n} nodes of num-node-list"
            )));
        }
        let mut cols = 0u64;
        if !l.is_empty() {
            for s in l.split(',') {
                let t = s.trim();
                let x: f32 = t
                    .parse()
                    .map_err(|_| lines.err(format!("column {cols}: {t:?} is not a number")))?;
                if !x.is_finite() {
                    return Err(lines.err(format!("column {cols}: {t} is not finite")));
                }
                sink.push(x)?;
                cols += 1;
            }
        }
        match f {
            None => f = Some(cols),
            Some(f) if f != cols => {
                return Err(lines.err(format!(
                    "ragged row: {cols} features, expected {f} (as the first row)"
                )))
            }
            _ => {}
        }
        rows += 1;
    }
    if rows != n {
        return Err(StoreError::input(
            path,
            format!("{rows} feature rows, expected one per node, N = {n} (num-node-list)"),
        ));
    }
    Ok((f.unwrap_or(0), sink.finish()?))
}

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
    let mut entries: Vec<_> = std::fs::read_dir(raw)
        .map_err(|e| StoreError::io(raw, "read directory", e))?
        .collect::<Result<_, _>>()
        .map_err(|e| StoreError::io(raw, "read directory", e))?;
    entries.sort_by_key(|e| e.file_name());
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
            &raw,
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

    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let mut builder =
        CsrBuilder::new(&scratch, n, n_edges.saturating_mul(2), DEFAULT_BUCKET_BYTES)?;
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
            push_edge_index(&data_npz, &scratch, n, &mut builder, &bar)?
        }
    };
    bar.finish();
    if seen != n_edges {
        return Err(StoreError::input(
            &edges_path,
            format!("{seen} edges, expected {n_edges} as num-edge-list says"),
        ));
    }
    let mode = opts.train_graph;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let graph = build::write_graph(&w, builder, None, &is_train, progress)?;

    let (n_features, feats) = match layout {
        Homogeneous::Csv => {
            let p = raw.join("node-feat.csv.gz");
            if p.exists() {
                write_features_csv(&w, &p, n)?
            } else {
                (0, write_no_features(&w)?)
            }
        }
        Homogeneous::Binary => write_features_npz(&w, &data_npz, n)?,
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

fn write_features_npz(
    w: &StoreWriter,
    path: &Path,
    n: u64,
) -> Result<(u64, SectionEntry), StoreError> {
    let mut npz = open_npz(path)?;
    let Some(npy) = npz_member(&mut npz, path, "node_feat")? else {
        return Ok((0, write_no_features(w)?));
    };
    let f = match npy.shape() {
        [rows, f] if *rows == n => *f,
        s => {
            return Err(StoreError::input(
                path,
                format!("member node_feat: shape expected ({n}, F), got {s:?}"),
            ))
        }
    };
    let mut sink = FeatureSink::new(w)?;
    for_each_f64(npy, path, "node_feat", |i, x| {
        // Checked as stored: a finite f64 beyond f32's range (1e300) would be inf, which
        // `check` refuses (issue 55).
        let y = x as f32;
        if !y.is_finite() {
            return Err(StoreError::input(
                path,
                format!(
                    "member node_feat: row {}, column {}: {x:?} {}, expected a finite float32",
                    i / f.max(1),
                    i % f.max(1),
                    if x.is_finite() {
                        "is beyond float32's range"
                    } else {
                        "is not finite"
                    }
                ),
            ));
        }
        sink.push(y)
    })?;
    Ok((f, sink.finish()?))
}
