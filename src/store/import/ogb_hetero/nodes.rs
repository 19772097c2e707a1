//! Per node type: labels (single-task, `raw/node-label/<type>/`), the split
//! (`split/<name>/<type>/`) into roles, and features (`raw/node-feat/<type>/`) written in
//! the type's own width.

use std::collections::BTreeSet;
use std::path::Path;

use crate::store::format::{
    type_features_section, Dtype, NodeTypeMeta, Role, SectionEntry, MAX_CLASSES, NO_LABEL,
};
use crate::store::import::limits;
use crate::store::import::ogb::{choose_split, read_split_into, GzLines, OgbOptions};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

use super::layout::{fields, local_id, marked_types, NodeType};

/// The labelled types, every node's label ([`NO_LABEL`] where none), the largest class.
type TypeLabels = (BTreeSet<usize>, Vec<u32>, Option<u64>);

/// The labelled types (`nodetype-has-label.csv.gz`, else those with a directory), the
/// labels of all N nodes ([`NO_LABEL`] where none) and the largest class met.
pub(super) fn read_labels(
    raw: &Path,
    types: &[NodeType],
    n: u64,
) -> Result<TypeLabels, StoreError> {
    let labelled = marked_types(
        &raw.join("nodetype-has-label.csv.gz"),
        &raw.join("node-label"),
        types,
    )?;
    let mut labels = limits::filled(raw, "labels", n, NO_LABEL)?;
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
    Ok((labelled, labels, max_class))
}

/// Labels of one type into the global table (single-task); returns the largest class.
pub(super) fn read_type_labels(
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

/// The split chosen and read per type into the roles: only labelled types have one, a
/// split node's label is not nan, some node trains.
pub(super) fn read_roles(
    dir: &Path,
    opts: &OgbOptions,
    types: &[NodeType],
    (labelled, labels): (&BTreeSet<usize>, &[u32]),
    n: u64,
) -> Result<(String, Vec<u8>), StoreError> {
    let raw = dir.join("raw");
    let (split_name, split_dir) = choose_split(
        dir,
        opts.split.as_deref(),
        "<type>/{train,valid,test}.csv.gz",
    )?;
    let split_types = marked_types(
        &split_dir.join("nodetype-has-split.csv.gz"),
        &split_dir,
        types,
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
    Ok((split_name, roles))
}

/// One type's split files into the global role table (ids local to the type).
pub(super) fn read_type_split(
    dir: &Path,
    ty: &NodeType,
    roles: &mut [u8],
) -> Result<(), StoreError> {
    read_split_into(dir, roles, |lines, l| {
        local_id(lines, l, ty, "node").map(|v| (v as usize, u64::from(v) - ty.start))
    })
}

/// Each type's features (`raw/node-feat/<type>/node-feat.csv.gz`, none without it, noted)
/// and its record.
pub(super) fn write_features(
    w: &StoreWriter,
    feat_root: &Path,
    types: &[NodeType],
    labelled: &BTreeSet<usize>,
    notes: &mut Vec<String>,
) -> Result<Vec<NodeTypeMeta>, StoreError> {
    let mut node_types = Vec::with_capacity(types.len());
    for (t, ty) in types.iter().enumerate() {
        let p = feat_root.join(&ty.name).join("node-feat.csv.gz");
        let (n_features, features) = if p.exists() {
            let (f, e) = write_type_features(w, &p, t, ty)?;
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
    Ok(node_types)
}

/// One type's features into its own section; (width, entry), or None without a file.
pub(super) fn write_type_features(
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
