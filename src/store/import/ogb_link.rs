//! `import ogb-link DIR`: Open Graph Benchmark link-property datasets with their own
//! splits and negatives (issue 52), as the `ogb` package downloads them (`ogbl-collab/`,
//! `ogbl-citation2/`, `ogbl-ppa/`, `ogbl-ddi/`).
//!
//! * `raw/edge.csv.gz` (`src,dst` per line), `raw/num-node-list.csv.gz`,
//!   `raw/num-edge-list.csv.gz`, optionally `raw/node-feat.csv.gz`: the graph, which for
//!   OGB's link datasets holds the training edges only (what OGB's loaders give as the
//!   graph); stored undirected (both directions, self loops and duplicates dropped and
//!   counted: collab repeats a pair once per year). `raw/edge_year.csv.gz`, when present
//!   (collab: one year per line of `edge.csv.gz`), becomes the store's edge times (unit
//!   `year`; a pair met in several years keeps the **earliest**, the year the edge first
//!   exists; `split-edges --by-time` splits on them). Other raw files (`edge_weight`,
//!   `node_year`) are ignored with a note.
//! * `split/<name>/{train,valid,test}.pt` (read by [`super::torch_pt`]), in one of two
//!   layouts, chosen by the keys of `valid.pt`:
//!   - pairs (collab, ppa, ddi): `edge` (E × 2) the positives, `edge_neg` (P × 2) a pool
//!     of negative pairs;
//!   - tails (citation2): `source_node`, `target_node` (E) the positives,
//!     `target_node_neg` (E × K) each positive's K negative tails.
//!
//!   `train.pt` is read only for its count of edges (a note if it differs from
//!   `num-edge-list`). Keys besides these (`weight`, `year`) are ignored with a note.
//!
//! The store's link split is *given* ([`LinkMeta::given`]): positives in the dataset's
//! order, `edge_neg` as the negative pairs (each oriented a ≤ b: the pairs of OGB's
//! undirected datasets are scored symmetrically), `target_node_neg` as the tails (K its
//! width, the rows as given); a set without one kind of negatives has that section empty
//! and the header says so (K = 0, or 0 pairs).
//!
//! **Positives** must meet every split's invariants, or the import is refused naming the
//! file and the pair: ids < N, u ≠ v, not an edge of the stored graph (a leak: message
//! passing would see the target), not twice in the split. **Negatives** are kept as
//! OGB gives them, even the few that are true edges, repeats or self pairs (collab's are
//! uniform random pairs, citation2's tails uniform random nodes): OGB's evaluators and
//! every leaderboard figure count them as negatives, so dropping or redrawing them would
//! give figures that are not OGB's; `check` verifies their range. Only the csv.gz layout
//! is read (`raw/data.npz`, ogbl-vessel's binary layout, is refused), and knowledge-graph
//! splits (`head`/`relation`/`tail`: wikikg2, biokg) are refused.
//!
//! Memory: the positives and negatives are held, 4 bytes per id (streamed from the `.pt`
//! members straight into u32, never as int64; a numpy array's bytes are decoded where
//! they are in the pickle, which is held while its file is read), plus a hash set of the
//! positives that finds one in `edge.csv.gz` (about 32 bytes each), each checked against
//! [`limits::check_memory`] before it is allocated; edges stream through the external
//! [`CsrBuilder`]: what ogbl-citation2 needs is its 2 × 86,956 × 1,000 tails (0.7 GB).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{Dtype, LinkMeta, LinkSectionId, SectionEntry, TrainGraph, MAX_NODES};
use crate::store::import::ogb::{
    choose_split, node_id, read_count, write_features_csv, GzLines, PROGRESS_EVERY,
};
use crate::store::import::torch_pt::PtFile;
use crate::store::import::{
    limits, sorted_entries, write_no_features, write_roles, ImportReport, LabelTable,
};
use crate::store::link::LinkSet;
use crate::store::time::TimeSpool;
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// Options of the OGB link importer.
#[derive(Debug, Clone, Default)]
pub struct OgbLinkOptions {
    /// The split's directory name under `split/` (default: the only one).
    pub split: Option<String>,
}

/// Which layout the split's `.pt` files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OgbLinkLayout {
    /// `edge` and `edge_neg` (ogbl-collab, ppa, ddi): a pool of negative pairs.
    Pairs,
    /// `source_node`, `target_node`, `target_node_neg` (ogbl-citation2): tails.
    Tails,
}

/// What an OGB link import did.
#[derive(Debug, Clone)]
pub struct OgbLinkReport {
    /// Counts and time, as every importer reports them.
    pub report: ImportReport,
    /// The split used.
    pub split: String,
    /// The split files' layout.
    pub layout: OgbLinkLayout,
    /// Validation and test positives.
    pub positives: [u64; 2],
    /// Tail negatives per positive K (0: none).
    pub negatives: u64,
    /// Negative pairs of the validation and test sets.
    pub negative_pairs: [u64; 2],
    /// Files or keys ignored, counts that differ, one sentence each.
    pub notes: Vec<String>,
}

/// Files of `raw/` that the importer reads.
const KNOWN_RAW: [&str; 5] = [
    "edge.csv.gz",
    "edge_year.csv.gz",
    "num-node-list.csv.gz",
    "num-edge-list.csv.gz",
    "node-feat.csv.gz",
];

/// One held-out set as read.
struct SetData {
    path: PathBuf,
    pos: Vec<(u32, u32)>,
    tails: Vec<u32>,
    k: u64,
    pairs: Vec<(u32, u32)>,
}

/// Refuses what this importer does not read and lists the raw files it ignores.
fn survey_raw(raw: &Path) -> Result<Vec<String>, StoreError> {
    if !raw.is_dir() {
        return Err(StoreError::input(
            raw,
            "not found: expected an OGB link dataset directory (raw/, split/)",
        ));
    }
    if raw.join("data.npz").exists() {
        return Err(StoreError::input(
            raw.join("data.npz"),
            "OGB's binary layout (ogbl-vessel): import ogb-link reads the csv.gz layout (raw/edge.csv.gz)",
        ));
    }
    let entries = sorted_entries(raw)?;
    let mut extra = Vec::new();
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir()
            || name.starts_with("num-node-dict")
            || name.starts_with("triplet-type-list")
        {
            return Err(StoreError::input(
                raw.join(&name),
                "a heterogeneous dataset (raw/relations/, num-node-dict: ogbl-biokg's layout): a store holds one node type and one edge type",
            ));
        }
        if !KNOWN_RAW.contains(&name.as_str()) {
            extra.push(name);
        }
    }
    Ok(extra)
}

/// Refuses a `.pt` whose keys fit neither layout; the layout of those that fit.
fn layout_of(pt: &PtFile) -> Result<OgbLinkLayout, StoreError> {
    let has = |k: &str| pt.get(k).is_some();
    if has("head") || has("relation") || has("tail") {
        return Err(StoreError::input(
            pt.path(),
            "a knowledge-graph split (head/relation/tail: ogbl-wikikg2, biokg): import ogb-link reads homogeneous link datasets",
        ));
    }
    match (has("edge"), has("source_node") || has("target_node")) {
        (true, false) => Ok(OgbLinkLayout::Pairs),
        (false, true) => Ok(OgbLinkLayout::Tails),
        _ => Err(StoreError::input(
            pt.path(),
            format!(
                "keys {:?}: expected `edge` (and `edge_neg`: ogbl-collab's layout) or `source_node`, `target_node` (and `target_node_neg`: ogbl-citation2's)",
                pt.keys()
            ),
        )),
    }
}

/// Array `key` of `pt` as node ids with the shape `want` (None: any length there), each
/// checked < `n`; returns the ids and the shape.
fn ids(
    pt: &mut PtFile,
    key: &str,
    want: &[Option<u64>],
    n: u64,
) -> Result<(Vec<u32>, Vec<u64>), StoreError> {
    let path = pt.path().to_path_buf();
    let a = pt.get(key).ok_or_else(|| {
        StoreError::input(
            &path,
            format!("no key {key:?}; the file has {:?}", pt.keys()),
        )
    })?;
    let shape = a.shape.clone();
    let fits = shape.len() == want.len()
        && shape
            .iter()
            .zip(want)
            .all(|(&d, w)| w.is_none_or(|w| w == d));
    if !fits {
        let show: Vec<String> = want
            .iter()
            .map(|w| w.map_or("_".to_string(), |w| w.to_string()))
            .collect();
        return Err(StoreError::input(
            &path,
            format!(
                "key {key:?}: shape {shape:?}, expected ({})",
                show.join(", ")
            ),
        ));
    }
    limits::check_memory(
        &path,
        &format!("key {key:?}: {} ids", a.len()),
        u128::from(a.len()) * 4,
    )?;
    let cols = shape.get(1).copied().unwrap_or(1).max(1);
    let mut out = limits::filled(&path, &format!("key {key:?}"), a.len(), 0u32)?;
    pt.for_each_int(key, |i, x| {
        if x < 0 || x as u64 >= n {
            let at = if shape.len() == 1 {
                format!("[{i}]")
            } else {
                format!("[{}, {}]", i / cols, i % cols)
            };
            return Err(StoreError::input(
                &path,
                format!(
                    "key {key:?}{at} = {x}: node id out of range, expected 0..{n} (num-node-list)"
                ),
            ));
        }
        out[i as usize] = x as u32;
        Ok(())
    })?;
    Ok((out, shape))
}

/// Reads `valid.pt` or `test.pt` (opened as `pt`) in `layout`.
fn read_set(
    mut pt: PtFile,
    layout: OgbLinkLayout,
    n: u64,
    notes: &mut Vec<String>,
) -> Result<SetData, StoreError> {
    let path = &pt.path().to_path_buf();
    let got = layout_of(&pt)?;
    if got != layout {
        return Err(StoreError::input(
            path,
            format!(
                "layout {got:?} (keys {:?}), expected {layout:?} as valid.pt",
                pt.keys()
            ),
        ));
    }
    let used: &[&str] = match layout {
        OgbLinkLayout::Pairs => &["edge", "edge_neg"],
        OgbLinkLayout::Tails => &["source_node", "target_node", "target_node_neg"],
    };
    let ignored: Vec<&str> = pt
        .keys()
        .into_iter()
        .filter(|k| !used.contains(k))
        .collect();
    if !ignored.is_empty() {
        notes.push(format!("{}: keys {ignored:?} ignored", path.display()));
    }
    let mut set = SetData {
        path: path.to_path_buf(),
        pos: Vec::new(),
        tails: Vec::new(),
        k: 0,
        pairs: Vec::new(),
    };
    match layout {
        OgbLinkLayout::Pairs => {
            let (e, _) = ids(&mut pt, "edge", &[None, Some(2)], n)?;
            set.pos = e.chunks_exact(2).map(|p| (p[0], p[1])).collect();
            if pt.get("edge_neg").is_some() {
                let (q, _) = ids(&mut pt, "edge_neg", &[None, Some(2)], n)?;
                set.pairs = q
                    .chunks_exact(2)
                    .map(|p| (p[0].min(p[1]), p[0].max(p[1])))
                    .collect();
            }
        }
        OgbLinkLayout::Tails => {
            let (s, shape) = ids(&mut pt, "source_node", &[None], n)?;
            let e = shape[0];
            let (t, _) = ids(&mut pt, "target_node", &[Some(e)], n).map_err(|err| {
                match pt.get("target_node") {
                    Some(a) if a.shape != [e] => StoreError::input(
                        path,
                        format!(
                            "key \"target_node\": shape {:?}, expected ({e}) as source_node",
                            a.shape
                        ),
                    ),
                    _ => err,
                }
            })?;
            set.pos = s.into_iter().zip(t).collect();
            if let Some(a) = pt.get("target_node_neg") {
                let k = match a.shape.as_slice() {
                    [rows, k] if *rows == e => *k,
                    s => {
                        return Err(StoreError::input(
                            path,
                            format!(
                                "key \"target_node_neg\": shape {s:?}, expected ({e}, K): one row of negatives per positive of source_node"
                            ),
                        ))
                    }
                };
                if k > u64::from(u32::MAX) {
                    return Err(StoreError::input(path, format!("key \"target_node_neg\": {k} negatives per positive, expected at most {}", u32::MAX)));
                }
                let (tails, _) = ids(&mut pt, "target_node_neg", &[Some(e), Some(k)], n)?;
                set.tails = tails;
                set.k = k;
            }
        }
    }
    Ok(set)
}

/// Key of an unordered pair.
fn key(u: u32, v: u32) -> u64 {
    let (a, b) = if u < v { (u, v) } else { (v, u) };
    (u64::from(a) << 32) | u64::from(b)
}

/// Imports the OGB link-property dataset in `dir` into a new store at `out`.
pub fn import_ogb_link(
    dir: &Path,
    out: &Path,
    opts: &OgbLinkOptions,
    force: bool,
    progress: &Progress,
) -> Result<OgbLinkReport, StoreError> {
    let start = Instant::now();
    if !dir.is_dir() {
        return Err(StoreError::input(
            dir,
            "not a directory (expected an OGB link dataset directory)",
        ));
    }
    let raw = dir.join("raw");
    let extra = survey_raw(&raw)?;
    let mut notes: Vec<String> = extra
        .iter()
        .map(|f| format!("raw/{f} ignored (not read by import ogb-link)"))
        .collect();
    let count_path = raw.join("num-node-list.csv.gz");
    let (n, n_edges) = counts(&count_path, &raw)?;
    let (split_name, split_dir) = split_files(dir, opts)?;
    train_count_note(&split_dir, n_edges, &mut notes)?;
    let (layout, val, test) = held_out_sets(&split_dir, n, &mut notes)?;
    let valid_path = split_dir.join("valid.pt");
    let positives = positives(&val, &test, &valid_path)?;

    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let mut builder =
        CsrBuilder::new(&scratch, n, n_edges.saturating_mul(2), DEFAULT_BUCKET_BYTES)?;
    let year_path = raw.join("edge_year.csv.gz");
    let years = push_edges(
        &w,
        &raw,
        (n, n_edges),
        (&val, &test, positives),
        &mut builder,
        progress,
    )?;
    let graph = build::write_graph(&w, builder, None, &|_| true, progress)?;
    let edge_time = match years {
        Some((_, spool)) => {
            let t = spool.write(&w, &graph, Some("year"), &year_path)?;
            notes.push(format!(
                "edge times from raw/edge_year.csv.gz: years {} to {} (a pair listed in several years keeps the earliest)",
                t.min, t.max
            ));
            Some(t)
        }
        None => None,
    };
    let feat_path = raw.join("node-feat.csv.gz");
    let (n_features, feats) = if feat_path.exists() {
        write_features_csv(&w, &feat_path, n)?
    } else {
        notes.push("no raw/node-feat.csv.gz: the store has no node features (F = 0)".into());
        (0, write_no_features(&w)?)
    };
    let roles = limits::filled(&count_path, "roles", n, 0u8)?;
    let labels = LabelTable::none(n as usize);
    let report = ImportReport::new(n, &graph, start);
    let stored_edges = graph.n_entries / 2;
    let meta = Meta {
        n_nodes: n,
        n_features,
        n_classes: 0,
        label_kind: labels.kind,
        train_graph: TrainGraph::Given,
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import ogb-link {} --split {split_name}",
            dir.display()
        ),
    };
    let mut header = build::header(
        meta,
        graph,
        feats,
        labels.write(&w)?,
        write_roles(&w, &roles)?,
    );
    header.edge_time = edge_time;
    let link_sections = link_sections(&w, &val, &test)?;
    let (n_val, n_test) = (val.pos.len() as u64, test.pos.len() as u64);
    let (k, pairs) = (val.k, [val.pairs.len() as u64, test.pairs.len() as u64]);
    // Written: the commit's `check` reads them from the files (mapped), not from here.
    drop((val, test));
    header.link = Some(LinkMeta {
        n_val,
        n_test,
        negatives: k,
        val_negpairs: Some(pairs[0]),
        test_negpairs: Some(pairs[1]),
        given: true,
        seed: 0,
        allow_isolated: false,
        input_edges: stored_edges + n_val + n_test,
        by_time: None,
        sections: link_sections,
    });
    w.commit(&header, crate::store::check::check)?;
    Ok(OgbLinkReport {
        report: ImportReport {
            seconds: start.elapsed().as_secs_f64(),
            ..report
        },
        split: split_name,
        layout,
        positives: [n_val, n_test],
        negatives: k,
        negative_pairs: pairs,
        notes,
    })
}

/// N and E from `num-node-list.csv.gz` (at `count_path`) and `num-edge-list.csv.gz`; N
/// checked against the u32 ids and, before anything in proportion to it is allocated, the
/// label and role tables against memory.
fn counts(count_path: &Path, raw: &Path) -> Result<(u64, u64), StoreError> {
    let n = read_count(count_path)?;
    let n_edges = read_count(&raw.join("num-edge-list.csv.gz"))?;
    if n > MAX_NODES {
        return Err(StoreError::input(
            count_path,
            format!("{n} nodes exceed the u32 index limit {MAX_NODES}"),
        ));
    }
    // The label and role tables, before anything in proportion to N is allocated.
    limits::check_memory(
        count_path,
        &format!("the label and role tables of N = {n} nodes"),
        u128::from(n) * 5,
    )?;
    Ok((n, n_edges))
}

/// The split's directory, chosen by name, holding `train.pt`, `valid.pt` and `test.pt`.
fn split_files(dir: &Path, opts: &OgbLinkOptions) -> Result<(String, PathBuf), StoreError> {
    let (split_name, split_dir) =
        choose_split(dir, opts.split.as_deref(), "{train,valid,test}.pt")?;
    for f in ["train.pt", "valid.pt", "test.pt"] {
        if !split_dir.join(f).exists() {
            return Err(StoreError::input(
                split_dir.join(f),
                "not found: expected split/<name>/{train,valid,test}.pt (OGB's link-property split)",
            ));
        }
    }
    Ok((split_name, split_dir))
}

/// `train.pt`, for its count only (a note when it differs from num-edge-list); its pickle
/// (all of it, for numpy arrays) is dropped before the held-out sets are read.
fn train_count_note(
    split_dir: &Path,
    n_edges: u64,
    notes: &mut Vec<String>,
) -> Result<(), StoreError> {
    let train_path = split_dir.join("train.pt");
    let train_pt = PtFile::open(&train_path)?;
    let train_count = match layout_of(&train_pt)? {
        OgbLinkLayout::Pairs => train_pt.get("edge").and_then(|a| a.shape.first().copied()),
        OgbLinkLayout::Tails => train_pt
            .get("source_node")
            .and_then(|a| a.shape.first().copied()),
    };
    match train_count {
        Some(c) if c != n_edges => notes.push(format!(
            "{} holds {c} training edges, raw/num-edge-list.csv.gz {n_edges}: the stored graph is raw/edge.csv.gz's (as OGB's loaders)",
            train_path.display()
        )),
        Some(_) => {}
        None => {
            return Err(StoreError::input(
                &train_path,
                format!("keys {:?}: expected `edge` or `source_node`", train_pt.keys()),
            ))
        }
    }
    drop(train_pt);
    Ok(())
}

/// The held-out sets, `valid.pt` then `test.pt`, in the layout `valid.pt`'s keys say; a
/// tails layout needs one K in both.
fn held_out_sets(
    split_dir: &Path,
    n: u64,
    notes: &mut Vec<String>,
) -> Result<(OgbLinkLayout, SetData, SetData), StoreError> {
    let valid_path = split_dir.join("valid.pt");
    let valid_pt = PtFile::open(&valid_path)?;
    let layout = layout_of(&valid_pt)?;
    let val = read_set(valid_pt, layout, n, notes)?;
    let test = read_set(PtFile::open(&split_dir.join("test.pt"))?, layout, n, notes)?;
    if layout == OgbLinkLayout::Tails && val.k != test.k {
        return Err(StoreError::input(
            &test.path,
            format!(
                "{} negatives per positive, expected {} as valid.pt (the store holds one K)",
                test.k, val.k
            ),
        ));
    }
    Ok((layout, val, test))
}

/// The held-out positives by undirected pair: u ≠ v, and each held out once (within and
/// across the sets).
fn positives(
    val: &SetData,
    test: &SetData,
    valid_path: &Path,
) -> Result<HashMap<u64, (LinkSet, usize)>, StoreError> {
    let held = val.pos.len() + test.pos.len();
    limits::check_memory(
        valid_path,
        &format!("the index of {held} positives"),
        held as u128 * 32,
    )?;
    let mut positives: HashMap<u64, (LinkSet, usize)> = HashMap::with_capacity(held);
    for (set, data) in [(LinkSet::Val, val), (LinkSet::Test, test)] {
        for (i, &(u, v)) in data.pos.iter().enumerate() {
            if u == v {
                return Err(StoreError::input(
                    &data.path,
                    format!("positive {i} ({u}, {v}) is a self pair, expected u ≠ v"),
                ));
            }
            if let Some((s, j)) = positives.insert(key(u, v), (set, i)) {
                let where_ = if s == set {
                    format!("positive {j} of the same file")
                } else {
                    format!("positive {j} of valid.pt")
                };
                return Err(StoreError::input(
                    &data.path,
                    format!("positive {i} ({u}, {v}) is {where_} again (as an undirected pair): a split holds each edge out once"),
                ));
            }
        }
    }
    Ok(positives)
}

/// The edge pass over `raw/edge.csv.gz`: each edge pushed both ways (a held-out positive
/// met there is an error), its year spooled when `raw/edge_year.csv.gz` is there (one
/// per edge); the count checked. Returns the year lines and their spool.
fn push_edges(
    w: &StoreWriter,
    raw: &Path,
    (n, n_edges): (u64, u64),
    (val, test, positives): (&SetData, &SetData, HashMap<u64, (LinkSet, usize)>),
    builder: &mut CsrBuilder,
    progress: &Progress,
) -> Result<Option<(GzLines, TimeSpool)>, StoreError> {
    let set_file = |s: LinkSet| match s {
        LinkSet::Val => &val.path,
        LinkSet::Test => &test.path,
    };
    let edges_path = raw.join("edge.csv.gz");
    let bar = progress.ticker(n_edges, "edges", "edges");
    let mut lines = GzLines::open(&edges_path)?;
    // The edge times, line by line beside edge.csv.gz, when the dataset has them.
    let year_path = raw.join("edge_year.csv.gz");
    let mut years = if year_path.exists() {
        Some((GzLines::open(&year_path)?, TimeSpool::create(w)?))
    } else {
        None
    };
    let mut seen = 0u64;
    while lines.advance()? {
        let l = lines.line();
        let mut it = l.split(',');
        let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
            return Err(lines.err(format!("expected \"src,dst\", got {l:?}")));
        };
        let u = node_id(&lines, a, n, "source node")?;
        let v = node_id(&lines, b, n, "destination node")?;
        if let Some(&(s, i)) = positives.get(&key(u, v)) {
            let (a, b) = match s {
                LinkSet::Val => val.pos[i],
                LinkSet::Test => test.pos[i],
            };
            return Err(StoreError::input(
                set_file(s),
                format!(
                    "positive {i} ({a}, {b}) is an edge of the graph ({u},{v} at {} line {}): a held-out edge in the graph its ends aggregate over leaks the target",
                    edges_path.display(),
                    seen + 1
                ),
            ));
        }
        builder.push(u, v)?;
        if u != v {
            builder.push(v, u)?;
        }
        if let Some((ylines, spool)) = &mut years {
            if !ylines.advance()? {
                return Err(ylines.err(format!(
                    "ends before {} (line {} has no year): expected one year per edge",
                    edges_path.display(),
                    seen + 1
                )));
            }
            let y = ylines.line().trim();
            let t: i64 = y
                .parse()
                .map_err(|_| ylines.err(format!("{y:?} is not an integer year")))?;
            spool.push(u, v, t)?;
        }
        seen += 1;
        if seen.is_multiple_of(PROGRESS_EVERY) {
            bar.inc(PROGRESS_EVERY);
        }
    }
    bar.finish();
    if seen != n_edges {
        return Err(StoreError::input(
            &edges_path,
            format!("{seen} edges, expected {n_edges} as num-edge-list says"),
        ));
    }
    drop(positives);
    if let Some((ylines, _)) = &mut years {
        if ylines.advance()? {
            return Err(ylines.err(format!(
                "more years than the {seen} edges of {}: expected one year per edge",
                edges_path.display()
            )));
        }
    }
    Ok(years)
}

/// The six link sections (the sets' positives, tails and pairs), in `LinkSectionId` order.
fn link_sections(
    w: &StoreWriter,
    val: &SetData,
    test: &SetData,
) -> Result<Vec<SectionEntry>, StoreError> {
    let flat = |v: &[(u32, u32)]| v.iter().flat_map(|&(a, b)| [a, b]).collect::<Vec<u32>>();
    let mut link_sections: Vec<SectionEntry> = Vec::with_capacity(6);
    for (id, data) in [
        (LinkSectionId::ValPos, &flat(&val.pos)),
        (LinkSectionId::ValNeg, &val.tails),
        (LinkSectionId::ValNegPairs, &flat(&val.pairs)),
        (LinkSectionId::TestPos, &flat(&test.pos)),
        (LinkSectionId::TestNeg, &test.tails),
        (LinkSectionId::TestNegPairs, &flat(&test.pairs)),
    ] {
        let mut s = w.link_section(id)?;
        s.write_u32s(data)?;
        link_sections.push(s.finish()?);
    }
    debug_assert!(link_sections.iter().all(|s| s.dtype == Dtype::U32));
    Ok(link_sections)
}
