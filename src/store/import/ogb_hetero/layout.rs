//! What a heterogeneous dataset directory says before any edge is read: the node types
//! (`num-node-dict.csv.gz`), the relations (`triplet-type-list.csv.gz` or `raw/relations/`)
//! and their counts, the types marked as labelled or split, the files ignored with a note.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::store::format::{check_type_name, MAX_NODES, MAX_NODE_TYPES, MAX_RELATIONS};
use crate::store::import::ogb::{read_count, GzLines};
use crate::store::import::sorted_entries;
use crate::store::StoreError;

use super::NUM_NODE_DICT;

/// Files of `raw/` the typed importer reads.
const KNOWN_RAW: [&str; 3] = [
    NUM_NODE_DICT,
    "triplet-type-list.csv.gz",
    "nodetype-has-label.csv.gz",
];

/// Directories of `raw/` the typed importer reads.
const KNOWN_RAW_DIRS: [&str; 3] = ["relations", "node-feat", "node-label"];

/// One node type as read.
pub(super) struct NodeType {
    pub(super) name: String,
    pub(super) count: u64,
    pub(super) start: u64,
}

/// One relation as listed (before its reverse is added).
pub(super) struct Triplet {
    pub(super) src: usize,
    pub(super) name: String,
    pub(super) dst: usize,
    pub(super) dir: PathBuf,
}

/// Splits a CSV line into trimmed fields.
pub(super) fn fields(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

/// `num-node-dict.csv.gz`: type names (header) and one count per type, ids in name order.
pub(super) fn read_node_dict(path: &Path) -> Result<Vec<NodeType>, StoreError> {
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
pub(super) fn type_of(
    types: &[NodeType],
    name: &str,
    path: &Path,
    what: &str,
) -> Result<usize, StoreError> {
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
pub(super) fn read_triplets(raw: &Path, types: &[NodeType]) -> Result<Vec<Triplet>, StoreError> {
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
        let dirs = sorted_entries(&rel_root)?;
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
pub(super) fn marked_types(
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
        let entries = sorted_entries(dirs)?;
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
pub(super) fn local_id(
    lines: &GzLines,
    s: &str,
    ty: &NodeType,
    what: &str,
) -> Result<u32, StoreError> {
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

/// Lists `raw/`'s files and directories the typed importer does not read.
pub(super) fn survey(raw: &Path) -> Result<Vec<String>, StoreError> {
    let mut notes = Vec::new();
    let entries = sorted_entries(raw)?;
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
pub(super) fn other_files(dir: &Path, keep: &[&str], what: &str, notes: &mut Vec<String>) {
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

/// Every relation's directory exists and names its count (`num-edge-list.csv.gz`) before
/// anything is written; other files there are noted.
pub(super) fn relation_counts(
    triplets: &[Triplet],
    notes: &mut Vec<String>,
) -> Result<Vec<u64>, StoreError> {
    let mut counts = Vec::with_capacity(triplets.len());
    for t in triplets {
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
            notes,
        );
    }
    Ok(counts)
}

/// Node-feature directories name known types; other files there are noted.
pub(super) fn check_feature_dirs(
    feat_root: &Path,
    types: &[NodeType],
    notes: &mut Vec<String>,
) -> Result<(), StoreError> {
    if feat_root.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(feat_root)
            .map_err(|e| StoreError::io(feat_root, "read directory", e))?
            .flatten()
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            type_of(types, &name, &e.path(), "a feature directory")?;
            other_files(
                &e.path(),
                &["node-feat.csv.gz"],
                &format!("raw/node-feat/{name}"),
                notes,
            );
        }
    }
    Ok(())
}
