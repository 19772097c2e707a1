//! Importers: GraphSAINT's dataset directories, whitespace edge lists and OGB's
//! node-property datasets ([`ogb`]). This file holds
//! the readers they share: `class_map.json`, `role.json`, and the streaming feature copy
//! (from `.npy`, read by [`crate::npy`]) with optional standardisation.

pub mod arrays;
pub mod edgelist;
pub mod graphsaint;
pub mod limits;
pub mod ogb;
mod ogb_hetero;
pub mod ogb_link;
pub mod torch_pt;

use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::npy::Npy;
use crate::store::format::{
    Dtype, LabelKind, Role, SectionEntry, SectionId, MAX_CLASSES, NO_LABEL,
};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

pub use arrays::{import_arrays, import_arrays_with, ArrayGraph, ArrayLabels, Edges};
pub use edgelist::{import_edgelist, EdgeListOptions};
pub use graphsaint::{import_graphsaint, GraphSaintOptions, Resplit, TrainGraphMode};
pub use ogb::{OgbLayout, OgbOptions, OgbReport};
pub use ogb_link::{import_ogb_link, OgbLinkLayout, OgbLinkOptions, OgbLinkReport};

/// Imports the OGB node-property-prediction dataset in `dir` into a new store at `out`:
/// a typed store for a heterogeneous dataset (ogbn-mag's layout, `ogb_hetero/`, issue
/// 57), else `ogb/`'s homogeneous import. The choice is made here, above both, so that
/// the typed import may use the homogeneous one's readers without a cycle.
pub fn import_ogb(
    dir: &Path,
    out: &Path,
    opts: &OgbOptions,
    force: bool,
    progress: &crate::progress::Progress,
) -> Result<OgbReport, StoreError> {
    ogb::check_ogb_input(dir, opts)?;
    if dir.join("raw").join(ogb_hetero::NUM_NODE_DICT).exists() {
        return ogb_hetero::import_ogb_hetero(dir, out, opts, force, progress);
    }
    ogb::import_homogeneous(dir, out, opts, force, progress)
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImportReport {
    /// N.
    pub n_nodes: u64,
    /// Directed entries in the full graph.
    pub entries: u64,
    /// Directed entries in the training graph.
    pub train_entries: u64,
    /// Self loops dropped from the full graph.
    pub self_loops: u64,
    /// Duplicate entries dropped from the full graph.
    pub duplicates: u64,
    /// Wall time.
    pub seconds: f64,
}

impl ImportReport {
    /// The report of an import that wrote `graph` for `n_nodes` nodes, started at `start`.
    pub fn new(
        n_nodes: u64,
        graph: &crate::store::build::GraphSections,
        start: std::time::Instant,
    ) -> Self {
        ImportReport {
            n_nodes,
            entries: graph.n_entries,
            train_entries: graph.n_train_entries,
            self_loops: graph.stats.self_loops,
            duplicates: graph.stats.duplicates,
            seconds: start.elapsed().as_secs_f64(),
        }
    }
}

/// A training graph with fewer than this fraction of the full graph's entries is called
/// small by [`warnings`]. An induced training graph keeps about (training fraction)² of
/// the edges: GraphSAINT's inductive splits (half or more of the nodes) keep a quarter or
/// more, while inducing on a Planetoid split (120 of 2,708 Cora nodes) keeps 8 of 5,278
/// edges, and a plan sampling `graph = "train"` then trains on almost no edges (issue 55:
/// 28–35 % accuracy instead of 70–80 %). A tenth flags the second kind and not the first.
pub const SMALL_TRAIN_GRAPH: f64 = 0.1;

/// What an import should tell the user about the store it wrote, one sentence each
/// (printed as warnings by `saintflow import`; the library's importers call it too):
///
/// * a store without labels (GNN plans need them; embedding plans do not);
/// * a labelled store without training nodes, or without validation or test nodes;
/// * a training graph under [`SMALL_TRAIN_GRAPH`] of the full graph's entries, with the
///   way to the transductive protocol (`--train-graph full`);
/// * single-label class ids below the largest that no node has (a stray label 9 among
///   classes 0..5 makes C = 10: the model gets 10 outputs, 4 never trained). Such gaps are
///   reported, not refused: real datasets may leave a class unused.
pub fn warnings(store: &crate::store::GraphStore) -> Vec<String> {
    let mut out = Vec::new();
    if store.n_classes() == 0 && store.n_nodes() > 0 {
        out.push(
            "no labels: GNN plans (`saintflow train gcn`) need labelled training nodes, so re-import with `--labels Y.npy` (or class_map.json) and a split (`--split 0.6,0.2,0.2` or `--roles role.json`) to train one; [embedding] plans (deepwalk, node2vec, line) train without".to_string(),
        );
    }
    if store.n_classes() > 0 {
        use crate::store::Role;
        if store.role_count(Role::Train) == 0 {
            out.push(
                "labels but no training nodes: training on this store has nothing to fit (give a split with training nodes)".to_string(),
            );
        } else {
            for (r, what) in [(Role::Val, "validation"), (Role::Test, "test")] {
                if store.role_count(r) == 0 {
                    out.push(format!(
                        "no {what} nodes: {what} metrics will not be measured"
                    ));
                }
            }
        }
    }
    let (full, train) = (store.full().n_entries(), store.train().n_entries());
    if full > 0 && (train as f64) < SMALL_TRAIN_GRAPH * full as f64 {
        out.push(format!(
            "the training graph holds {} of the full graph's {} undirected edges ({:.2} %, under {} %): a plan sampling graph = \"train\" sees only these; re-import with --train-graph full for the transductive protocol (OGB's), or sample graph = \"full\"",
            train / 2,
            full / 2,
            100.0 * train as f64 / full as f64,
            100.0 * SMALL_TRAIN_GRAPH
        ));
    }
    if let crate::store::Labels::Single(l) = store.labels() {
        // The classes present, sorted: O(N), never O(C) (C may be up to MAX_CLASSES).
        let c = store.n_classes() as u64;
        let mut present: Vec<u32> = l.iter().copied().filter(|&x| u64::from(x) < c).collect();
        present.sort_unstable();
        present.dedup();
        let empty = c - present.len() as u64;
        if empty > 0 {
            let mut shown = Vec::new();
            let mut next = 0u64;
            for &k in present.iter().chain([c as u32].iter()) {
                while next < u64::from(k) && shown.len() < 10 {
                    shown.push(next.to_string());
                    next += 1;
                }
                next = u64::from(k) + 1;
            }
            let top = l.iter().filter(|&&x| u64::from(x) + 1 == c).count();
            out.push(format!(
                "labels: {empty} of the C = {c} classes (0..{}) have no node: {}{}; C is the largest class id + 1 (class {} has {top} node(s)): a stray label? the model gets {c} outputs",
                c - 1,
                shown.join(", "),
                if empty > shown.len() as u64 { ", ..." } else { "" },
                c - 1,
            ));
        }
    }
    out
}

/// Labels read from a file, one row per node.
pub struct LabelTable {
    /// Single or multi.
    pub kind: LabelKind,
    /// C.
    pub n_classes: u64,
    /// Single: one u32 per node (NO_LABEL if absent). Multi: ⌈C/8⌉ bytes per node.
    pub data: Vec<u8>,
}

impl LabelTable {
    /// No labels at all: single-label with C = 0, every node unlabelled.
    pub fn none(n: usize) -> Self {
        LabelTable {
            kind: LabelKind::Single,
            n_classes: 0,
            // NO_LABEL is u32::MAX: every byte 0xff, without a u32 copy first.
            data: vec![0xff; n * 4],
        }
    }

    fn row_bytes(&self) -> usize {
        match self.kind {
            LabelKind::Single => 4,
            LabelKind::Multi => self.n_classes.div_ceil(8) as usize,
        }
    }

    /// Whether node `v` has a label.
    pub fn is_labelled(&self, v: usize) -> bool {
        let r = self.row_bytes();
        match self.kind {
            LabelKind::Single => {
                u32::from_le_bytes(self.data[v * 4..v * 4 + 4].try_into().unwrap()) != NO_LABEL
            }
            LabelKind::Multi => self.data[v * r..(v + 1) * r].iter().any(|&b| b != 0),
        }
    }

    /// Writes the labels section.
    pub fn write(&self, w: &StoreWriter) -> Result<SectionEntry, StoreError> {
        let dtype = match self.kind {
            LabelKind::Single => Dtype::U32,
            LabelKind::Multi => Dtype::U8,
        };
        let mut s = w.section(SectionId::Labels, dtype)?;
        s.write_bytes(&self.data)?;
        s.finish()
    }
}

/// Checks that every node with a role has a label; the error names `path`.
pub fn require_labels(path: &Path, labels: &LabelTable, roles: &[u8]) -> Result<(), StoreError> {
    if let Some(v) =
        (0..roles.len()).find(|&v| roles[v] != Role::None as u8 && !labels.is_labelled(v))
    {
        return Err(StoreError::input(
            path,
            format!(
                "node {v} is in the split ({:?}) but has no label",
                Role::from_byte(roles[v]).unwrap()
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- class_map.json

/// One class_map value as first seen; fixes the kind and, for multi-label, C.
enum Seen {
    Nothing,
    Single { max: u64 },
    Multi { c: usize },
}

/// Maps a node id as written in an input file to its store id (`import edgelist
/// --remap`); None: the id names no node.
pub type IdMap<'a> = &'a dyn Fn(&str) -> Option<usize>;

struct ClassMapSeed<'a> {
    n: usize,
    map: Option<IdMap<'a>>,
    single: &'a mut Vec<u32>,
    multi: &'a mut Vec<u8>,
    seen: &'a mut Seen,
}

impl<'de> DeserializeSeed<'de> for ClassMapSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ClassMapSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object mapping node ids to a class id or a list of 0/1")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut present = vec![false; self.n];
        while let Some(key) = map.next_key::<String>()? {
            let v: usize = match self.map {
                Some(map) => map(&key).ok_or_else(|| {
                    de::Error::custom(format!(
                        "node id {key:?} does not appear in the edge list (--remap numbers its nodes only)"
                    ))
                })?,
                None => key
                    .parse()
                    .map_err(|_| de::Error::custom(format!("key {key:?} is not a node id")))?,
            };
            if v >= self.n {
                return Err(de::Error::custom(format!(
                    "node id {v} out of range, expected < N = {}",
                    self.n
                )));
            }
            if std::mem::replace(&mut present[v], true) {
                return Err(de::Error::custom(format!("node id {v} appears twice")));
            }
            let value: LabelValue = map.next_value()?;
            match (value, &mut *self.seen) {
                (LabelValue::Class(c), Seen::Nothing) => {
                    *self.seen = Seen::Single { max: c };
                    *self.single = vec![NO_LABEL; self.n];
                    self.single[v] = class_u32(c, v)?;
                }
                (LabelValue::Class(c), Seen::Single { max }) => {
                    *max = (*max).max(c);
                    self.single[v] = class_u32(c, v)?;
                }
                (LabelValue::Bits(bits), Seen::Nothing) => {
                    let c = bits.len();
                    *self.seen = Seen::Multi { c };
                    *self.multi = vec![0u8; self.n * c.div_ceil(8)];
                    set_bits(self.multi, v, c, &bits);
                }
                (LabelValue::Bits(bits), Seen::Multi { c }) => {
                    if bits.len() != *c {
                        return Err(de::Error::custom(format!(
                            "node {v}: label list expected length {c} (as for the first node), got {}",
                            bits.len()
                        )));
                    }
                    set_bits(self.multi, v, *c, &bits);
                }
                (_, _) => {
                    return Err(de::Error::custom(format!(
                        "node {v}: mixes single-label (integer) and multi-label (list) values"
                    )))
                }
            }
        }
        Ok(())
    }
}

fn class_u32<E: de::Error>(c: u64, v: usize) -> Result<u32, E> {
    if c >= MAX_CLASSES {
        return Err(E::custom(format!(
            "node {v}: class id {c} too large, expected < {MAX_CLASSES}"
        )));
    }
    Ok(c as u32)
}

fn set_bits(multi: &mut [u8], v: usize, c: usize, bits: &[bool]) {
    let r = c.div_ceil(8);
    for (j, &b) in bits.iter().enumerate() {
        if b {
            multi[v * r + j / 8] |= 1 << (j % 8);
        }
    }
}

enum LabelValue {
    Class(u64),
    Bits(Vec<bool>),
}

impl<'de> de::Deserialize<'de> for LabelValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LabelValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative class id or a list of 0/1")
            }
            fn visit_u64<E: de::Error>(self, x: u64) -> Result<LabelValue, E> {
                Ok(LabelValue::Class(x))
            }
            fn visit_i64<E: de::Error>(self, x: i64) -> Result<LabelValue, E> {
                u64::try_from(x)
                    .map(LabelValue::Class)
                    .map_err(|_| E::custom(format!("class id {x} is negative")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LabelValue, A::Error> {
                let mut bits = Vec::new();
                while let Some(x) = seq.next_element::<i64>()? {
                    match x {
                        0 => bits.push(false),
                        1 => bits.push(true),
                        _ => {
                            return Err(de::Error::custom(format!(
                                "multi-label entry {x}, expected 0 or 1"
                            )))
                        }
                    }
                }
                Ok(LabelValue::Bits(bits))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a GraphSAINT `class_map.json` for `n` nodes (streaming: no JSON tree in memory).
pub fn read_class_map(path: &Path, n: usize) -> Result<LabelTable, StoreError> {
    read_class_map_with(path, n, None)
}

/// [`read_class_map`] with its keys translated by `map` (None: keys are store ids).
pub fn read_class_map_with(
    path: &Path,
    n: usize,
    map: Option<IdMap<'_>>,
) -> Result<LabelTable, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 20, file));
    let (mut single, mut multi, mut seen) = (Vec::new(), Vec::new(), Seen::Nothing);
    ClassMapSeed {
        n,
        map,
        single: &mut single,
        multi: &mut multi,
        seen: &mut seen,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|e| StoreError::input(path, format!("invalid class map: {e}")))?;
    Ok(match seen {
        Seen::Nothing => LabelTable::none(n),
        Seen::Single { max } => LabelTable {
            kind: LabelKind::Single,
            n_classes: max + 1,
            data: bytemuck::cast_slice(&single).to_vec(),
        },
        Seen::Multi { c } => LabelTable {
            kind: LabelKind::Multi,
            n_classes: c as u64,
            data: multi,
        },
    })
}

// ---------------------------------------------------------------- role.json

/// Reads a GraphSAINT `role.json` (`{"tr": [...], "va": [...], "te": [...]}`) into one
/// role byte per node; ids out of range or in two lists are errors.
pub fn read_roles(path: &Path, n: usize) -> Result<Vec<u8>, StoreError> {
    read_roles_with(path, n, None)
}

/// [`read_roles`] with the ids translated by `map` (None: they are store ids); with a
/// map, ids may be numbers or strings, as the edge list wrote them.
pub fn read_roles_with(
    path: &Path,
    n: usize,
    map: Option<IdMap<'_>>,
) -> Result<Vec<u8>, StoreError> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum RoleId {
        Int(i64),
        Str(String),
    }
    #[derive(serde::Deserialize)]
    struct RoleFile {
        tr: Vec<RoleId>,
        va: Vec<RoleId>,
        te: Vec<RoleId>,
    }
    let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let parsed: RoleFile = serde_json::from_reader(BufReader::new(file)).map_err(|e| {
        StoreError::input(
            path,
            format!("expected {{\"tr\": [ids], \"va\": [ids], \"te\": [ids]}}: {e}"),
        )
    })?;
    let mut roles = vec![Role::None as u8; n];
    for (list, name, role) in [
        (&parsed.tr, "tr", Role::Train),
        (&parsed.va, "va", Role::Val),
        (&parsed.te, "te", Role::Test),
    ] {
        for id in list {
            let v = match (id, map) {
                (RoleId::Int(id), None) => {
                    usize::try_from(*id).ok().filter(|&v| v < n).ok_or_else(|| {
                        StoreError::input(
                            path,
                            format!("\"{name}\": node id {id} out of range, expected 0..{n}"),
                        )
                    })?
                }
                (RoleId::Str(s), None) => {
                    return Err(StoreError::input(
                        path,
                        format!("\"{name}\": node id {s:?} is not a number (string ids need import --remap)"),
                    ))
                }
                (id, Some(map)) => {
                    let key = match id {
                        RoleId::Int(i) => i.to_string(),
                        RoleId::Str(s) => s.clone(),
                    };
                    map(&key).ok_or_else(|| {
                        StoreError::input(
                            path,
                            format!("\"{name}\": node id {key:?} does not appear in the edge list (--remap numbers its nodes only)"),
                        )
                    })?
                }
            };
            if roles[v] != Role::None as u8 {
                let other = ["", "tr", "va", "te"][roles[v] as usize];
                let what = if roles[v] == role as u8 {
                    format!("node {v} is listed twice in \"{name}\"")
                } else {
                    format!(
                        "node {v} is in both \"{other}\" and \"{name}\": roles must not overlap"
                    )
                };
                return Err(StoreError::input(path, what));
            }
            roles[v] = role as u8;
        }
    }
    Ok(roles)
}

/// Writes the features section from an `(n, F)` NPY file, standardised when `standardize`
/// with the mean and population standard deviation of the training rows (`roles`); a
/// zero-variance column is only centred, as scikit-learn's StandardScaler does. Streams
/// the file (twice when standardising): memory is O(F). Returns F and the entry.
pub fn write_features_npy(
    w: &StoreWriter,
    path: &Path,
    n: usize,
    standardize: bool,
    roles: &[u8],
) -> Result<(u64, SectionEntry), StoreError> {
    let fit = |v: usize| roles[v] == Role::Train as u8;
    let fit_rows: Option<&dyn Fn(usize) -> bool> = standardize.then_some(&fit);
    let npy = Npy::open(path)?;
    let f = match npy.shape.as_slice() {
        [rows, cols] if *rows == n as u64 => *cols as usize,
        [rows] if *rows == n as u64 => 1,
        s => {
            return Err(StoreError::input(
                path,
                format!("shape expected ({n}, F), got {s:?}"),
            ))
        }
    };
    let transform = match fit_rows {
        None => None,
        Some(fit) => {
            let (mut sum, mut sumsq, mut count) = (vec![0f64; f], vec![0f64; f], 0u64);
            let mut i = 0usize;
            Npy::open(path)?.for_each_f64(path, |x| {
                let (v, j) = (i / f.max(1), i % f.max(1));
                // A value float32 cannot hold would make the column's variance infinite
                // and standardise the whole column to 0: refused here, as unstandardised.
                if !(x as f32).is_finite() {
                    return Err(not_f32(path, i, f, x));
                }
                if fit(v) {
                    sum[j] += x;
                    sumsq[j] += x * x;
                    if j == 0 {
                        count += 1;
                    }
                }
                i += 1;
                Ok::<(), StoreError>(())
            })?;
            if count == 0 {
                return Err(StoreError::input(
                    path,
                    "cannot standardise: no training nodes to fit on",
                ));
            }
            let mean: Vec<f64> = sum.iter().map(|s| s / count as f64).collect();
            let scale: Vec<f64> = (0..f)
                .map(|j| {
                    let var = (sumsq[j] / count as f64 - mean[j] * mean[j]).max(0.0);
                    if var > 0.0 {
                        1.0 / var.sqrt()
                    } else {
                        1.0
                    }
                })
                .collect();
            Some((mean, scale))
        }
    };
    let mut s = w.section(SectionId::Features, Dtype::F32)?;
    let mut buf: Vec<f32> = Vec::with_capacity(1 << 16);
    let mut i = 0usize;
    let mut flush_err = None;
    npy.for_each_f64(path, |x| {
        let j = i % f.max(1);
        let y = match &transform {
            Some((mean, scale)) => (x - mean[j]) * scale[j],
            None => x,
        };
        // Checked as stored (f32): a finite f64 beyond f32's range would be written as
        // inf, which `check` refuses (issue 55).
        let z = y as f32;
        if !(x as f32).is_finite() {
            return Err(not_f32(path, i, f, x));
        }
        if !z.is_finite() {
            return Err(StoreError::input(
                path,
                format!(
                    "element {i} (row {}, column {j}): {x:?} is not finite once standardised, expected a finite float32",
                    i / f.max(1)
                ),
            ));
        }
        buf.push(z);
        i += 1;
        if buf.len() == buf.capacity() {
            if let Err(e) = s.write_f32s(&buf) {
                flush_err = Some(e);
            }
            buf.clear();
        }
        Ok(())
    })?;
    if let Some(e) = flush_err {
        return Err(e);
    }
    s.write_f32s(&buf)?;
    Ok((f as u64, s.finish()?))
}

/// The error of feature element `i` (of rows of `f`), `x`, which float32 cannot hold.
fn not_f32(path: &Path, i: usize, f: usize, x: f64) -> StoreError {
    let why = if x.is_finite() {
        "is beyond float32's range"
    } else {
        "is not finite"
    };
    StoreError::input(
        path,
        format!(
            "element {i} (row {}, column {}): {x:?} {why}, expected a finite float32",
            i / f.max(1),
            i % f.max(1)
        ),
    )
}

/// Reads labels from an NPY file: 1-D integers → single-label (negative = unlabelled),
/// 2-D 0/1 → multi-label.
pub fn read_labels_npy(path: &Path, n: usize) -> Result<LabelTable, StoreError> {
    let npy = Npy::open(path)?;
    if !npy.is_integer() {
        return Err(StoreError::input(
            path,
            "labels expected an integer or boolean dtype",
        ));
    }
    match npy.shape.clone().as_slice() {
        [rows] if *rows == n as u64 => {
            let mut out = Vec::with_capacity(n);
            let mut max = None::<u64>;
            npy.for_each_f64(path, |x| {
                if x < 0.0 {
                    out.push(NO_LABEL);
                } else if x >= MAX_CLASSES as f64 {
                    return Err(StoreError::input(
                        path,
                        format!(
                            "node {}: class id {x} too large, expected < {MAX_CLASSES}",
                            out.len()
                        ),
                    ));
                } else {
                    out.push(x as u32);
                    max = Some(max.map_or(x as u64, |m: u64| m.max(x as u64)));
                }
                Ok(())
            })?;
            Ok(LabelTable {
                kind: LabelKind::Single,
                n_classes: max.map_or(0, |m| m + 1),
                data: bytemuck::cast_slice(&out).to_vec(),
            })
        }
        [rows, c] if *rows == n as u64 => {
            if *c >= MAX_CLASSES {
                return Err(StoreError::input(
                    path,
                    format!("{c} classes, expected fewer than {MAX_CLASSES}"),
                ));
            }
            let c = *c as usize;
            let r = c.div_ceil(8);
            let mut data = vec![0u8; n * r];
            let mut i = 0usize;
            npy.for_each_f64(path, |x| {
                let (v, j) = (i / c, i % c);
                if x == 1.0 {
                    data[v * r + j / 8] |= 1 << (j % 8);
                } else if x != 0.0 {
                    return Err(StoreError::input(
                        path,
                        format!("node {v}, class {j}: expected 0 or 1, got {x}"),
                    ));
                }
                i += 1;
                Ok(())
            })?;
            Ok(LabelTable {
                kind: LabelKind::Multi,
                n_classes: c as u64,
                data,
            })
        }
        s => Err(StoreError::input(
            path,
            format!("labels shape expected ({n},) or ({n}, C), got {s:?}"),
        )),
    }
}

/// Reads a labels file by extension: `.json` (class_map) or `.npy`.
pub fn read_labels(path: &Path, n: usize) -> Result<LabelTable, StoreError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => read_class_map(path, n),
        Some("npy") => read_labels_npy(path, n),
        _ => Err(StoreError::input(
            path,
            "labels file expected a .json class map or a .npy array",
        )),
    }
}

/// Writes the roles section.
pub fn write_roles(w: &StoreWriter, roles: &[u8]) -> Result<SectionEntry, StoreError> {
    let mut s = w.section(SectionId::Roles, Dtype::U8)?;
    s.write_bytes(roles)?;
    s.finish()
}

/// Writes an all-empty features section (F = 0).
pub fn write_no_features(w: &StoreWriter) -> Result<SectionEntry, StoreError> {
    w.section(SectionId::Features, Dtype::F32)?.finish()
}

/// The shared tail of the edge importers (edge lists, arrays): the header from `meta` and
/// the sections, the commit, which refuses a full graph with an entry lacking its reverse
/// through `asymmetric(u, v, count)` (`None`: the importer symmetrised it), and the report
/// with the whole import's time.
#[allow(clippy::too_many_arguments)]
pub(crate) fn commit_import(
    w: StoreWriter,
    meta: crate::store::build::Meta,
    graph: crate::store::build::GraphSections,
    features: SectionEntry,
    labels: &LabelTable,
    roles: &[u8],
    start: std::time::Instant,
    asymmetric: Option<&dyn Fn(u32, u32, u64) -> StoreError>,
    edge_time: Option<crate::store::format::TimeMeta>,
) -> Result<ImportReport, StoreError> {
    let report = ImportReport::new(meta.n_nodes, &graph, start);
    let mut header = crate::store::build::header(
        meta,
        graph,
        features,
        labels.write(&w)?,
        write_roles(&w, roles)?,
    );
    header.edge_time = edge_time;
    w.commit(&header, |store| {
        let asym = crate::store::scan::asymmetric_entries(store.full());
        if let (Some(&(u, v)), Some(err)) = (asym.first.first(), asymmetric) {
            return Err(err(u, v, asym.count));
        }
        // The edge times as the full check verifies them (the graph is symmetric here).
        StoreError::from_problems(
            store.path(),
            crate::store::time::check_times(store, asym.count == 0),
        )
    })?;
    Ok(ImportReport {
        seconds: start.elapsed().as_secs_f64(),
        ..report
    })
}

/// The entries of directory `dir` in name order (what the OGB importers scan `raw/` and
/// its subdirectories with); an error naming the directory if it cannot be read.
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<std::fs::DirEntry>, StoreError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| StoreError::io(dir, "read directory", e))?
        .collect::<Result<_, _>>()
        .map_err(|e| StoreError::io(dir, "read directory", e))?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}
