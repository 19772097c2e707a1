//! `import ogb DIR` of a heterogeneous dataset (ogbn-mag's layout; issue 57): a typed
//! store (docs/FORMAT.md, "Typed stores").
//!
//! The layout, as OGB's `read_csv_heterograph_raw` and `NodePropPredDataset` read it:
//!
//! * `raw/num-node-dict.csv.gz`: a header line of node-type names, one line of counts
//!   (several lines: several graphs, refused). Types get ids in name order, as OGB sorts
//!   them; a type's nodes are the global ids `start(t)..start(t) + count(t)`.
//! * `raw/triplet-type-list.csv.gz` (`src,rel,dst` per line), else the directories of
//!   `raw/relations/`; each relation in `raw/relations/<src>___<rel>___<dst>/`:
//!   `edge.csv.gz` (`s,d` per line: ids local to the source and destination types) and
//!   `num-edge-list.csv.gz` (its one count). `edge_reltype.csv.gz` (ogbn-mag's relation
//!   id per edge, which the directory already says) and `edge-feat.csv.gz` are ignored,
//!   with a note.
//! * `raw/node-feat/<type>/node-feat.csv.gz`: the type's features, one row per node, its
//!   own width (a type without the file has none: no bytes stored); other files there
//!   (ogbn-mag's `node_year.csv.gz`) are ignored with a note.
//! * `raw/node-label/<type>/node-label.csv.gz`: one class per node (`nan` or empty: no
//!   label); the labelled types are those `raw/nodetype-has-label.csv.gz` marks (else
//!   those with the directory). Single-task labels only: several columns are refused.
//! * `split/<name>/<type>/{train,valid,test}.csv.gz`: local ids of the type's nodes (the
//!   types `split/<name>/nodetype-has-split.csv.gz` marks, else those with a directory).
//!
//! Reverse relations are added as PyG's `ToUndirected` and the OGB R-GCN example do: a
//! relation between two types (`author writes paper`) gets a reverse `rev_<rel>`
//! (`paper rev_writes author`); a relation within one type (`paper cites paper`) is made
//! symmetric in place (its own reverse). The full graph is the union of all relations,
//! symmetric. Self loops and duplicates are dropped per relation and counted in a note.
//!
//! Streaming as the homogeneous importer: gzip decoded as a stream, each relation's
//! entries through an external [`CsrBuilder`] (one relation at a time, beside the full
//! graph's builder), features row by row; what is held is O(N) (labels, roles).
//!
//! Every error names the file (and line) and what is wrong; nothing is published unless
//! the whole import succeeds (the store writer's directory rename).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{BuildStats, CsrBuilder, CsrSink, DEFAULT_BUCKET_BYTES};
use crate::store::format::{
    check_type_name, relation_sections, type_features_section, Dtype, LabelKind, NodeTypeMeta,
    RelationMeta, Role, SectionEntry, TypesMeta, MAX_CLASSES, MAX_NODES, MAX_NODE_TYPES,
    MAX_RELATIONS, NO_LABEL,
};
use crate::store::import::ogb::{
    choose_split, read_count, read_split_into, GzLines, OgbLayout, OgbOptions, OgbReport,
    PROGRESS_EVERY,
};
use crate::store::import::{limits, write_no_features, write_roles, ImportReport, LabelTable};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// The file whose presence makes a dataset directory heterogeneous.
pub const NUM_NODE_DICT: &str = "num-node-dict.csv.gz";

/// Files of `raw/` the typed importer reads.
const KNOWN_RAW: [&str; 3] = [
    NUM_NODE_DICT,
    "triplet-type-list.csv.gz",
    "nodetype-has-label.csv.gz",
];

/// Directories of `raw/` the typed importer reads.
const KNOWN_RAW_DIRS: [&str; 3] = ["relations", "node-feat", "node-label"];

/// Bytes of memory one relation's builder keeps before spilling to its bucket files.
const RELATION_BUCKET_BYTES: u64 = 256 << 20;

/// One node type as read.
struct NodeType {
    name: String,
    count: u64,
    start: u64,
}

/// One relation as listed (before its reverse is added).
struct Triplet {
    src: usize,
    name: String,
    dst: usize,
    dir: PathBuf,
}

/// Splits a CSV line into trimmed fields.
fn fields(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

/// `num-node-dict.csv.gz`: type names (header) and one count per type, ids in name order.
fn read_node_dict(path: &Path) -> Result<Vec<NodeType>, StoreError> {
    let mut lines = GzLines::open(path)?;
    let mut header: Option<Vec<String>> = None;
    let mut counts: Option<Vec<u64>> = None;
    while lines.advance()? {
        let l = lines.line();
        if l.trim().is_empty() {
            continue;
        }
        match (&header, &counts) {
            (None, _) => {
                let names: Vec<String> = fields(l).iter().map(|s| s.to_string()).collect();
                for n in &names {
                    check_type_name(n).map_err(|e| lines.err(format!("node type: {e}")))?;
                }
                let unique: BTreeSet<&String> = names.iter().collect();
                if unique.len() != names.len() {
                    return Err(lines.err("a node type named twice in the header"));
                }
                if names.len() > MAX_NODE_TYPES {
                    return Err(lines.err(format!(
                        "{} node types, expected at most {MAX_NODE_TYPES}",
                        names.len()
                    )));
                }
                header = Some(names);
            }
            (Some(h), None) => {
                let f = fields(l);
                if f.len() != h.len() {
                    return Err(lines.err(format!(
                        "{} counts, expected one per node type of the header ({})",
                        f.len(),
                        h.len()
                    )));
                }
                let mut c = Vec::with_capacity(f.len());
                for (name, s) in h.iter().zip(f) {
                    c.push(s.parse::<u64>().map_err(|_| {
                        lines.err(format!(
                            "count of node type {name:?}: {s:?} is not a non-negative integer"
                        ))
                    })?);
                }
                counts = Some(c);
            }
            (Some(_), Some(_)) => {
                return Err(lines.err(
                    "a second line of counts: a graph-property dataset of several graphs; import ogb reads node-property datasets (one graph)",
                ))
            }
        }
    }
    let (Some(names), Some(counts)) = (header, counts) else {
        return Err(StoreError::input(
            path,
            "expected a header line of node types and one line of counts",
        ));
    };
    let mut types: Vec<(String, u64)> = names.into_iter().zip(counts).collect();
    types.sort();
    let mut start = 0u64;
    let mut out = Vec::with_capacity(types.len());
    for (name, count) in types {
        out.push(NodeType { name, count, start });
        start = start.saturating_add(count);
    }
    if start > MAX_NODES {
        return Err(StoreError::input(
            path,
            format!("{start} nodes in all exceed the u32 index limit {MAX_NODES}"),
        ));
    }
    Ok(out)
}

/// A type's index by name, or an error naming `path` and the known types.
fn type_of(types: &[NodeType], name: &str, path: &Path, what: &str) -> Result<usize, StoreError> {
    types.iter().position(|t| t.name == name).ok_or_else(|| {
        let known: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
        StoreError::input(
            path,
            format!(
                "{what} names node type {name:?}, which raw/{NUM_NODE_DICT} does not list (it has: {})",
                known.join(", ")
            ),
        )
    })
}

/// The relations: `triplet-type-list.csv.gz`, else the directories of `raw/relations/`.
fn read_triplets(raw: &Path, types: &[NodeType]) -> Result<Vec<Triplet>, StoreError> {
    let rel_root = raw.join("relations");
    let list = raw.join("triplet-type-list.csv.gz");
    let mut names: Vec<(String, String, String, PathBuf)> = Vec::new();
    if list.exists() {
        let mut lines = GzLines::open(&list)?;
        while lines.advance()? {
            let l = lines.line();
            if l.trim().is_empty() {
                continue;
            }
            let f = fields(l);
            let [s, r, d] = f.as_slice() else {
                return Err(lines.err(format!("expected \"src,rel,dst\", got {l:?}")));
            };
            names.push((s.to_string(), r.to_string(), d.to_string(), list.clone()));
        }
    } else {
        if !rel_root.is_dir() {
            return Err(StoreError::input(
                &rel_root,
                "not found: a heterogeneous dataset (raw/num-node-dict.csv.gz) keeps its edges in raw/relations/<src>___<rel>___<dst>/",
            ));
        }
        let mut dirs: Vec<_> = std::fs::read_dir(&rel_root)
            .map_err(|e| StoreError::io(&rel_root, "read directory", e))?
            .collect::<Result<_, _>>()
            .map_err(|e| StoreError::io(&rel_root, "read directory", e))?;
        dirs.sort_by_key(|e| e.file_name());
        for e in dirs {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if !path.is_dir() {
                return Err(StoreError::input(
                    &path,
                    "expected a directory <src>___<rel>___<dst> of one relation",
                ));
            }
            let parts: Vec<&str> = name.split("___").collect();
            let [s, r, d] = parts.as_slice() else {
                return Err(StoreError::input(
                    &path,
                    "a relation directory's name is <src>___<rel>___<dst>",
                ));
            };
            names.push((s.to_string(), r.to_string(), d.to_string(), path));
        }
    }
    if names.len() > MAX_RELATIONS / 2 {
        return Err(StoreError::input(
            &rel_root,
            format!(
                "{} relations, expected at most {} (each may get a reverse)",
                names.len(),
                MAX_RELATIONS / 2
            ),
        ));
    }
    names.sort();
    if list.exists() && rel_root.is_dir() {
        // Directories the list does not name are not read: say so.
        let listed: BTreeSet<String> = names
            .iter()
            .map(|(s, r, d, _)| format!("{s}___{r}___{d}"))
            .collect();
        let mut extra: Vec<String> = std::fs::read_dir(&rel_root)
            .map_err(|e| StoreError::io(&rel_root, "read directory", e))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !listed.contains(n))
            .collect();
        extra.sort();
        if let Some(first) = extra.first() {
            return Err(StoreError::input(
                rel_root.join(first),
                "a relation directory raw/triplet-type-list.csv.gz does not list (list it, or remove it)",
            ));
        }
    }
    let mut out: Vec<Triplet> = Vec::with_capacity(names.len());
    for (s, r, d, from) in names {
        let what = format!("relation ({s}, {r}, {d})");
        check_type_name(&r).map_err(|e| StoreError::input(&from, format!("{what}: {e}")))?;
        let src = type_of(types, &s, &from, &what)?;
        let dst = type_of(types, &d, &from, &what)?;
        if out
            .last()
            .is_some_and(|t| t.src == src && t.dst == dst && t.name == r)
        {
            return Err(StoreError::input(&from, format!("{what} listed twice")));
        }
        out.push(Triplet {
            src,
            name: r.clone(),
            dst,
            dir: rel_root.join(format!("{s}___{r}___{d}")),
        });
    }
    if out.is_empty() {
        return Err(StoreError::input(
            &rel_root,
            "no relation: expected raw/relations/<src>___<rel>___<dst>/edge.csv.gz",
        ));
    }
    Ok(out)
}

/// The types a `nodetype-has-*.csv.gz` file marks (a header of types, a row of
/// True/False), else the type directories under `dirs`. Unknown types are errors.
fn marked_types(
    flags: &Path,
    dirs: &Path,
    types: &[NodeType],
) -> Result<BTreeSet<usize>, StoreError> {
    let mut out = BTreeSet::new();
    if flags.exists() {
        let mut lines = GzLines::open(flags)?;
        let mut header: Option<Vec<String>> = None;
        while lines.advance()? {
            let l = lines.line();
            if l.trim().is_empty() {
                continue;
            }
            let Some(h) = &header else {
                header = Some(fields(l).iter().map(|s| s.to_string()).collect());
                continue;
            };
            let f = fields(l);
            if f.len() != h.len() {
                return Err(lines.err(format!(
                    "{} flags, expected one per type of the header ({})",
                    f.len(),
                    h.len()
                )));
            }
            for (name, x) in h.iter().zip(f) {
                let t = type_of(types, name, flags, "the header")?;
                match x.to_ascii_lowercase().as_str() {
                    "true" | "1" => {
                        out.insert(t);
                    }
                    "false" | "0" => {}
                    _ => {
                        return Err(
                            lines.err(format!("flag of {name:?}: {x:?}, expected True or False"))
                        )
                    }
                }
            }
            return Ok(out);
        }
        return Err(StoreError::input(
            flags,
            "expected a header line of node types and one line of flags",
        ));
    }
    if dirs.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(dirs)
            .map_err(|e| StoreError::io(dirs, "read directory", e))?
            .collect::<Result<_, _>>()
            .map_err(|e| StoreError::io(dirs, "read directory", e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if !e.path().is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            out.insert(type_of(types, &name, &e.path(), "a directory")?);
        }
    }
    Ok(out)
}

/// A node id local to type `ty`, or an error naming the line, the type and its count.
fn local_id(lines: &GzLines, s: &str, ty: &NodeType, what: &str) -> Result<u32, StoreError> {
    let v: u64 = s.parse().map_err(|_| {
        lines.err(format!(
            "{what} {s:?} is not a node id (a non-negative integer)"
        ))
    })?;
    if v >= ty.count {
        return Err(lines.err(format!(
            "{what} {v} out of range: node type {:?} has {} nodes (num-node-dict), expected < {}",
            ty.name, ty.count, ty.count
        )));
    }
    Ok((ty.start + v) as u32)
}

/// Labels of one type into the global table (single-task); returns the largest class.
fn read_type_labels(
    path: &Path,
    ty: &NodeType,
    labels: &mut [u32],
) -> Result<Option<u64>, StoreError> {
    let mut lines = GzLines::open(path)?;
    let mut k = 0u64;
    let mut max = None;
    while lines.advance()? {
        let l = lines.line();
        if k >= ty.count {
            return Err(lines.err(format!(
                "more label rows than the {} nodes of type {:?} (num-node-dict)",
                ty.count, ty.name
            )));
        }
        let f = fields(l);
        if f.len() > 1 {
            return Err(lines.err(format!(
                "{} label columns: a typed store holds single-task labels (one class per node), expected 1",
                f.len()
            )));
        }
        let t = f[0];
        if !(t.is_empty() || t.eq_ignore_ascii_case("nan")) {
            let c: f64 = t
                .parse()
                .map_err(|_| lines.err(format!("label {t:?} is not a number")))?;
            if !c.is_nan() {
                if c < 0.0 || c.fract() != 0.0 {
                    return Err(
                        lines.err(format!("class {c}, expected a non-negative integer or nan"))
                    );
                }
                if c >= MAX_CLASSES as f64 {
                    return Err(lines.err(format!("class {c} too large, expected < {MAX_CLASSES}")));
                }
                labels[(ty.start + k) as usize] = c as u32;
                max = Some(max.map_or(c as u64, |m: u64| m.max(c as u64)));
            }
        }
        k += 1;
    }
    if k != ty.count {
        return Err(StoreError::input(
            path,
            format!(
                "{k} label rows, expected one per node of type {:?}: {} (num-node-dict)",
                ty.name, ty.count
            ),
        ));
    }
    Ok(max)
}

/// One type's split files into the global role table (ids local to the type).
fn read_type_split(dir: &Path, ty: &NodeType, roles: &mut [u8]) -> Result<(), StoreError> {
    read_split_into(dir, roles, |lines, l| {
        local_id(lines, l, ty, "node").map(|v| (v as usize, u64::from(v) - ty.start))
    })
}

/// One type's features into its own section; (width, entry), or None without a file.
fn write_type_features(
    w: &StoreWriter,
    path: &Path,
    t: usize,
    ty: &NodeType,
) -> Result<(u64, SectionEntry), StoreError> {
    let mut lines = GzLines::open(path)?;
    let (name, file) = type_features_section(t);
    let mut section = w.named_section((&name, &file), Dtype::F32)?;
    let mut buf: Vec<f32> = Vec::with_capacity(1 << 16);
    let mut width = None::<u64>;
    let mut rows = 0u64;
    while lines.advance()? {
        let l = lines.line();
        if rows >= ty.count {
            return Err(lines.err(format!(
                "more feature rows than the {} nodes of type {:?} (num-node-dict)",
                ty.count, ty.name
            )));
        }
        let mut cols = 0u64;
        if !l.is_empty() {
            for s in l.split(',') {
                let s = s.trim();
                let x: f32 = s
                    .parse()
                    .map_err(|_| lines.err(format!("column {cols}: {s:?} is not a number")))?;
                if !x.is_finite() {
                    return Err(lines.err(format!("column {cols}: {s} is not finite")));
                }
                buf.push(x);
                cols += 1;
            }
        }
        match width {
            None if cols == 0 => {
                return Err(lines.err(format!(
                    "an empty feature row: node type {:?} has features, expected at least one column",
                    ty.name
                )))
            }
            None => width = Some(cols),
            Some(f) if f != cols => {
                return Err(lines.err(format!(
                    "{cols} features, expected {f}: node type {:?} has width {f} (its first row); every row of a type has the type's width",
                    ty.name
                )))
            }
            _ => {}
        }
        if buf.len() >= 1 << 16 {
            section.write_f32s(&buf)?;
            buf.clear();
        }
        rows += 1;
    }
    section.write_f32s(&buf)?;
    if rows != ty.count {
        return Err(StoreError::input(
            path,
            format!(
                "{rows} feature rows, expected one per node of type {:?}: {} (num-node-dict)",
                ty.name, ty.count
            ),
        ));
    }
    match width {
        Some(f) => Ok((f, section.finish()?)),
        None => Err(StoreError::input(
            path,
            format!(
                "no feature rows for the {} nodes of type {:?}",
                ty.count, ty.name
            ),
        )),
    }
}

/// A relation's builder's CSR as the relation's two sections; (offsets, indices,
/// entries, what the builder dropped).
fn write_relation(
    w: &StoreWriter,
    builder: CsrBuilder,
    r: usize,
    src: &NodeType,
) -> Result<(SectionEntry, SectionEntry, u64, BuildStats), StoreError> {
    let [(on, of), (iname, ifile)] = relation_sections(r);
    let mut offsets = w.named_section((&on, &of), Dtype::U64)?;
    let mut indices = w.named_section((&iname, &ifile), Dtype::U32)?;
    let mut sinks = [CsrSink {
        offsets: &mut offsets,
        indices: &mut indices,
        keep: None,
        rows: Some(src.start..src.start + src.count),
        entries: 0,
    }];
    let stats = builder.finish(&mut sinks, || {})?;
    let entries = sinks[0].entries;
    Ok((offsets.finish()?, indices.finish()?, entries, stats))
}

/// Lists `raw/`'s files and directories the typed importer does not read.
fn survey(raw: &Path) -> Result<Vec<String>, StoreError> {
    let mut notes = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(raw)
        .map_err(|e| StoreError::io(raw, "read directory", e))?
        .collect::<Result<_, _>>()
        .map_err(|e| StoreError::io(raw, "read directory", e))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let known = if e.path().is_dir() {
            KNOWN_RAW_DIRS.contains(&name.as_str())
        } else {
            KNOWN_RAW.contains(&name.as_str())
        };
        if !known {
            notes.push(format!(
                "raw/{name} ignored (not read by import ogb for a heterogeneous dataset)"
            ));
        }
    }
    Ok(notes)
}

/// Files in `dir` other than those in `keep`, as notes (`what` names the place).
fn other_files(dir: &Path, keep: &[&str], what: &str, notes: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    for n in names {
        let why = match n.as_str() {
            "edge_reltype.csv.gz" => {
                " (the relation's id per edge, which its directory already says)"
            }
            "node_year.csv.gz" => " (a per-node year, not a feature)",
            _ => "",
        };
        notes.push(format!("{what}/{n} ignored{why}"));
    }
}

/// Imports a heterogeneous OGB node-property dataset (ogbn-mag's layout) in `dir` into a
/// new typed store at `out`.
pub(super) fn import_ogb_hetero(
    dir: &Path,
    out: &Path,
    opts: &OgbOptions,
    force: bool,
    progress: &Progress,
) -> Result<OgbReport, StoreError> {
    let start = Instant::now();
    let raw = dir.join("raw");
    let mut notes = survey(&raw)?;
    let types = read_node_dict(&raw.join(NUM_NODE_DICT))?;
    let n: u64 = types.iter().map(|t| t.count).sum();
    let triplets = read_triplets(&raw, &types)?;

    // Every relation's files exist and name their counts before anything is written.
    let mut counts = Vec::with_capacity(triplets.len());
    for t in &triplets {
        if !t.dir.is_dir() {
            return Err(StoreError::input(
                &t.dir,
                "not found: the relation's directory (listed in raw/triplet-type-list.csv.gz)",
            ));
        }
        counts.push(read_count(&t.dir.join("num-edge-list.csv.gz"))?);
        let what = format!(
            "raw/relations/{}",
            t.dir.file_name().unwrap_or_default().to_string_lossy()
        );
        other_files(
            &t.dir,
            &["edge.csv.gz", "num-edge-list.csv.gz"],
            &what,
            &mut notes,
        );
    }

    limits::check_memory(
        &raw.join(NUM_NODE_DICT),
        &format!("the label and role tables of N = {n} nodes"),
        u128::from(n) * limits::TABLE_BYTES_PER_NODE,
    )?;

    // Labels.
    let labelled = marked_types(
        &raw.join("nodetype-has-label.csv.gz"),
        &raw.join("node-label"),
        &types,
    )?;
    let mut labels = limits::filled(&raw, "labels", n, NO_LABEL)?;
    let mut max_class: Option<u64> = None;
    for &t in &labelled {
        let p = raw
            .join("node-label")
            .join(&types[t].name)
            .join("node-label.csv.gz");
        if let Some(m) = read_type_labels(&p, &types[t], &mut labels)? {
            max_class = Some(max_class.map_or(m, |x| x.max(m)));
        }
    }

    // The split.
    let (split_name, split_dir) = choose_split(
        dir,
        opts.split.as_deref(),
        "<type>/{train,valid,test}.csv.gz",
    )?;
    let split_types = marked_types(
        &split_dir.join("nodetype-has-split.csv.gz"),
        &split_dir,
        &types,
    )?;
    let mut roles = limits::filled(&split_dir, "roles", n, Role::None as u8)?;
    for &t in &split_types {
        let d = split_dir.join(&types[t].name);
        if !labelled.contains(&t) {
            return Err(StoreError::input(
                &d,
                format!(
                    "a split of node type {:?}, which has no labels (raw/node-label/{}/)",
                    types[t].name, types[t].name
                ),
            ));
        }
        read_type_split(&d, &types[t], &mut roles)?;
    }
    if let Some(v) = (0..n as usize).find(|&v| roles[v] != 0 && labels[v] == NO_LABEL) {
        let t = types.partition_point(|ty| ty.start <= v as u64) - 1;
        return Err(StoreError::input(
            raw.join("node-label")
                .join(&types[t].name)
                .join("node-label.csv.gz"),
            format!(
                "node {} of type {:?} is in split {split_name:?} ({:?}) but its label is nan",
                v as u64 - types[t].start,
                types[t].name,
                Role::from_byte(roles[v]).unwrap_or(Role::None)
            ),
        ));
    }
    if !roles.contains(&(Role::Train as u8)) {
        return Err(StoreError::input(
            &split_dir,
            "no training nodes in any type's train.csv.gz, expected at least one",
        ));
    }

    // Node-feature directories name known types; other files there are noted.
    let feat_root = raw.join("node-feat");
    if feat_root.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(&feat_root)
            .map_err(|e| StoreError::io(&feat_root, "read directory", e))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            type_of(&types, &name, &e.path(), "a feature directory")?;
            other_files(
                &e.path(),
                &["node-feat.csv.gz"],
                &format!("raw/node-feat/{name}"),
                &mut notes,
            );
        }
    }

    // The relations, one at a time, each beside the full graph's builder.
    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let total = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
    let mut full = CsrBuilder::new(&scratch, n, total.saturating_mul(2), DEFAULT_BUCKET_BYTES)?;
    let bar = progress.ticker(total, "edges", "edges");
    // (triplet, is reverse): relation ids, originals first, then the reverses in order.
    let mut order: Vec<(usize, bool)> = (0..triplets.len()).map(|i| (i, false)).collect();
    order.extend(
        triplets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.src != t.dst)
            .map(|(i, _)| (i, true)),
    );
    let rel_id = |i: usize, rev: bool| order.iter().position(|&o| o == (i, rev)).unwrap();
    let mut names = BTreeSet::new();
    for &(i, rev) in &order {
        let t = &triplets[i];
        let (s, name, d) = if rev {
            (t.dst, format!("rev_{}", t.name), t.src)
        } else {
            (t.src, t.name.clone(), t.dst)
        };
        if !names.insert((s, name.clone(), d)) {
            return Err(StoreError::input(
                &t.dir,
                format!(
                    "the reverse relation ({}, {name}, {}) is also listed as a relation: rename one",
                    types[s].name, types[d].name
                ),
            ));
        }
    }
    let mut metas: Vec<Option<RelationMeta>> = vec![None; order.len()];
    let mut dropped = (0u64, 0u64);
    for (i, t) in triplets.iter().enumerate() {
        let (src, dst) = (&types[t.src], &types[t.dst]);
        let mut fwd = CsrBuilder::new(
            &scratch,
            n,
            counts[i].saturating_mul(2),
            RELATION_BUCKET_BYTES,
        )?;
        let mut back = (t.src != t.dst)
            .then(|| CsrBuilder::new(&scratch, n, counts[i], RELATION_BUCKET_BYTES))
            .transpose()?;
        let path = t.dir.join("edge.csv.gz");
        let mut lines = GzLines::open(&path)?;
        let mut seen = 0u64;
        while lines.advance()? {
            let l = lines.line();
            let mut it = l.split(',');
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                return Err(lines.err(format!("expected \"src,dst\", got {l:?}")));
            };
            let u = local_id(&lines, a.trim(), src, "source node")?;
            let v = local_id(&lines, b.trim(), dst, "destination node")?;
            fwd.push(u, v)?;
            match &mut back {
                Some(back) => back.push(v, u)?,
                None if u != v => fwd.push(v, u)?,
                None => {}
            }
            full.push(u, v)?;
            if u != v {
                full.push(v, u)?;
            }
            seen += 1;
            if seen.is_multiple_of(PROGRESS_EVERY) {
                bar.inc(PROGRESS_EVERY);
            }
        }
        bar.inc(seen % PROGRESS_EVERY);
        if seen != counts[i] {
            return Err(StoreError::input(
                &path,
                format!(
                    "{seen} edges, expected {} as num-edge-list.csv.gz says",
                    counts[i]
                ),
            ));
        }
        let r = rel_id(i, false);
        let rr = if back.is_some() { rel_id(i, true) } else { r };
        let (o, x, e, st) = write_relation(&w, fwd, r, src)?;
        dropped.0 += st.self_loops;
        dropped.1 += st.duplicates;
        metas[r] = Some(RelationMeta {
            name: t.name.clone(),
            src: t.src as u32,
            dst: t.dst as u32,
            n_entries: e,
            reverse: rr as u32,
            offsets: o,
            indices: x,
        });
        if let Some(back) = back {
            let (o, x, e, _) = write_relation(&w, back, rr, dst)?;
            metas[rr] = Some(RelationMeta {
                name: format!("rev_{}", t.name),
                src: t.dst as u32,
                dst: t.src as u32,
                n_entries: e,
                reverse: r as u32,
                offsets: o,
                indices: x,
            });
        }
    }
    bar.finish();
    if dropped.0 + dropped.1 > 0 {
        notes.push(format!(
            "{} self-loop and {} duplicate entries dropped from the relations",
            dropped.0, dropped.1
        ));
    }
    let mode = opts.train_graph;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let graph = build::write_graph(&w, full, None, &is_train, progress)?;

    // Features per type.
    let mut node_types = Vec::with_capacity(types.len());
    for (t, ty) in types.iter().enumerate() {
        let p = feat_root.join(&ty.name).join("node-feat.csv.gz");
        let (n_features, features) = if p.exists() {
            let (f, e) = write_type_features(&w, &p, t, ty)?;
            (f, Some(e))
        } else {
            (0, None)
        };
        node_types.push(NodeTypeMeta {
            name: ty.name.clone(),
            count: ty.count,
            n_features,
            features,
            labelled: labelled.contains(&t),
        });
    }
    let featureless: Vec<&str> = node_types
        .iter()
        .filter(|t| t.n_features == 0)
        .map(|t| t.name.as_str())
        .collect();
    if !featureless.is_empty() {
        notes.push(format!(
            "node types without raw/node-feat/<type>/node-feat.csv.gz have no features: {}",
            featureless.join(", ")
        ));
    }

    let report = ImportReport::new(n, &graph, start);
    let table = LabelTable {
        kind: LabelKind::Single,
        n_classes: max_class.map_or(0, |m| m + 1),
        data: bytemuck::cast_slice(&labels).to_vec(),
    };
    let meta = Meta {
        n_nodes: n,
        n_features: 0,
        n_classes: table.n_classes,
        label_kind: LabelKind::Single,
        train_graph: mode.stored(),
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import ogb {} --split {split_name} --train-graph {}",
            dir.display(),
            mode.word()
        ),
    };
    let mut header = build::header(
        meta,
        graph,
        write_no_features(&w)?,
        table.write(&w)?,
        write_roles(&w, &roles)?,
    );
    header.types = Some(TypesMeta {
        node_types,
        relations: metas
            .into_iter()
            .map(|m| m.expect("every relation written"))
            .collect(),
    });
    w.commit(&header, |store| {
        // The relations against the full graph as `check` verifies them (a writer bug is
        // refused here, never published).
        StoreError::from_problems(store.path(), crate::store::typed::check_full(store, true))
    })?;
    Ok(OgbReport {
        report: ImportReport {
            seconds: start.elapsed().as_secs_f64(),
            ..report
        },
        layout: OgbLayout::Hetero,
        split: split_name,
        notes,
    })
}
