//! Typed stores (issue 57): node types, relations, features per type — the reader API the
//! typed plans and samplers build on, and the checks of the typed sections.
//!
//! Layout (docs/FORMAT.md, "Typed stores"; the choice measured in
//! docs/bench/typed-layout.md): nodes of type t are the global ids `start(t)..start(t+1)`,
//! so the global CSR (`full`, `train`) stays one homogeneous graph over all nodes, the
//! union of the relations, and every homogeneous sampler and op reads it unchanged. Each
//! relation r is its own CSR: row k is node `start(src) + k`, its columns the global ids of
//! its destination-type neighbours, strictly increasing. A row's neighbours of one relation
//! are then one slice (two offset reads), and a relation's entries one contiguous run
//! (a per-relation SpMM streams it).
//!
//! The same API answers for a homogeneous store, as the one-type case: one node type
//! [`DEFAULT_NODE_TYPE`] over all nodes with the store's features, one relation
//! [`DEFAULT_RELATION`] that is the full graph and its own reverse. Code written against
//! it (typed plans, typed samplers) runs on every store.
//!
//! `open` checks what is O(N) here as for the global CSR: each relation's offsets (first
//! 0, monotone, last = its entries) and their checksums, and that nodes of unlabelled
//! types have no label and no role. `check` (`check_full`) verifies the rest: checksums
//! of the indices and features, every index in its destination type's range, rows
//! strictly increasing without self loops, each relation the transpose of its reverse,
//! the full graph exactly the union of the relations, finite features.

use std::ops::Range;

use rayon::prelude::*;

use crate::store::format::{SectionId, TypesMeta, DEFAULT_NODE_TYPE, DEFAULT_RELATION};
use crate::store::mmap::{Csr, GraphStore};
use crate::store::scan::{find_entries, find_rows, Found};
use crate::store::section::{check_offsets, Backing};
use crate::store::StoreError;

fn cast<T: bytemuck::Pod>(b: &Backing) -> &[T] {
    let bytes = b.bytes();
    if bytes.is_empty() {
        return &[];
    }
    // Cannot fail: mappings are page-aligned and their lengths were checked against the
    // validated header (a whole number of elements).
    bytemuck::cast_slice(bytes)
}

/// One relation's CSR: rows are the source type's nodes, columns global ids.
#[derive(Clone, Copy)]
pub struct RelCsr<'a> {
    /// Global id of row 0 (the source type's first node).
    pub src_start: u32,
    offsets: &'a [u64],
    indices: &'a [u32],
}

impl<'a> RelCsr<'a> {
    /// Rows: the source type's node count.
    pub fn n_rows(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The global ids of the rows (the source type's range).
    pub fn rows(&self) -> Range<u32> {
        self.src_start..self.src_start + self.n_rows() as u32
    }

    /// Entries of the relation.
    pub fn n_entries(&self) -> usize {
        self.indices.len()
    }

    /// The row offsets (source count + 1).
    pub fn offsets(&self) -> &'a [u64] {
        self.offsets
    }

    /// The column indices: global ids, row after row.
    pub fn indices(&self) -> &'a [u32] {
        self.indices
    }

    /// The neighbours through this relation of node `u` (a global id), strictly
    /// increasing; empty when `u` is not of the source type.
    pub fn row(&self, u: u32) -> &'a [u32] {
        match u.checked_sub(self.src_start) {
            Some(k) if (k as usize) < self.n_rows() => {
                let k = k as usize;
                // In bounds: offsets were checked monotone and ending at nnz at open.
                &self.indices[self.offsets[k] as usize..self.offsets[k + 1] as usize]
            }
            _ => &[],
        }
    }

    /// Degree of `u` through this relation (0 for a node of another type).
    pub fn degree(&self, u: u32) -> usize {
        self.row(u).len()
    }
}

/// One relation of a store, as [`GraphStore::relation`] gives it.
#[derive(Clone, Copy)]
pub struct Relation<'a> {
    /// Relation id.
    pub id: usize,
    /// Its name (`cites`, `rev_writes`).
    pub name: &'a str,
    /// Source node type.
    pub src: usize,
    /// Destination node type.
    pub dst: usize,
    /// The relation holding this one's entries transposed (itself when symmetric).
    pub reverse: usize,
    /// Its adjacency.
    pub csr: RelCsr<'a>,
}

/// A node type's features: `count × width` f32, row-major (empty when width is 0).
#[derive(Clone, Copy)]
pub struct TypeFeatures<'a> {
    /// Feature width F_t.
    pub width: usize,
    /// Global id of the type's first node (row 0).
    pub start: u32,
    /// Nodes of the type (rows).
    pub count: usize,
    /// The rows.
    pub data: &'a [f32],
}

impl<'a> TypeFeatures<'a> {
    /// The feature row of node `v` (a global id of this type), or None for a node of
    /// another type.
    pub fn row(&self, v: u32) -> Option<&'a [f32]> {
        let k = v.checked_sub(self.start)? as usize;
        let f = self.width;
        (k < self.count).then(|| &self.data[k * f..(k + 1) * f])
    }
}

impl GraphStore {
    /// The fraction of nonzero values in node type `t`'s features, counted on up to 4,096
    /// of its rows spread evenly (as [`GraphStore::feature_density`] over the whole
    /// store's): what the planner reads to run the products by a type's features sparse.
    /// 1 for a type without features.
    pub fn type_feature_density(&self, t: usize) -> f64 {
        let tf = self.type_features(t);
        super::mmap::sampled_density(tf.data, tf.count, tf.width)
    }

    /// Whether the store has node and edge types (a `types` record).
    pub fn is_typed(&self) -> bool {
        self.typed.is_some()
    }

    /// The types record, for a typed store.
    pub fn types(&self) -> Option<&TypesMeta> {
        self.header().types.as_ref()
    }

    /// Number of node types (1 for a homogeneous store).
    pub fn n_node_types(&self) -> usize {
        self.types().map_or(1, |t| t.node_types.len())
    }

    /// Node type `t`'s name ([`DEFAULT_NODE_TYPE`] for a homogeneous store). Panics if
    /// `t ≥ n_node_types()`.
    pub fn node_type_name(&self, t: usize) -> &str {
        match self.types() {
            Some(m) => &m.node_types[t].name,
            None => {
                assert_eq!(t, 0, "node type {t} of a one-type store");
                DEFAULT_NODE_TYPE
            }
        }
    }

    /// Node type index by name.
    pub fn node_type_index(&self, name: &str) -> Option<usize> {
        match self.types() {
            Some(m) => m.type_index(name),
            None => (name == DEFAULT_NODE_TYPE).then_some(0),
        }
    }

    /// The global ids of type `t`'s nodes. Panics if `t ≥ n_node_types()`.
    pub fn type_range(&self, t: usize) -> Range<u32> {
        match &self.typed {
            Some(m) => m.starts[t] as u32..m.starts[t + 1] as u32,
            None => {
                assert_eq!(t, 0, "node type {t} of a one-type store");
                0..self.n_nodes() as u32
            }
        }
    }

    /// The type of node `v` (a binary search of the types' starts). Panics if `v ≥ N`.
    pub fn node_type(&self, v: u32) -> usize {
        assert!(
            (v as usize) < self.n_nodes(),
            "node {v} of {}",
            self.n_nodes()
        );
        match &self.typed {
            Some(m) => m.starts.partition_point(|&s| s <= u64::from(v)) - 1,
            None => 0,
        }
    }

    /// Whether type `t`'s nodes may carry labels (every type of a homogeneous store).
    pub fn type_labelled(&self, t: usize) -> bool {
        self.types().is_none_or(|m| m.node_types[t].labelled)
    }

    /// Type `t`'s feature matrix (the store's features for a homogeneous store). Panics
    /// if `t ≥ n_node_types()`.
    pub fn type_features(&self, t: usize) -> TypeFeatures<'_> {
        match (&self.typed, self.types()) {
            (Some(maps), Some(m)) => TypeFeatures {
                width: m.node_types[t].n_features as usize,
                start: maps.starts[t] as u32,
                count: m.node_types[t].count as usize,
                data: cast(&maps.features[t]),
            },
            _ => {
                assert_eq!(t, 0, "node type {t} of a one-type store");
                TypeFeatures {
                    width: self.n_features(),
                    start: 0,
                    count: self.n_nodes(),
                    data: self.features(),
                }
            }
        }
    }

    /// Number of relations (1 for a homogeneous store: the full graph).
    pub fn n_relations(&self) -> usize {
        self.types().map_or(1, |t| t.relations.len())
    }

    /// Relation `r`. Panics if `r ≥ n_relations()`.
    pub fn relation(&self, r: usize) -> Relation<'_> {
        match (&self.typed, self.types()) {
            (Some(maps), Some(m)) => {
                let rel = &m.relations[r];
                Relation {
                    id: r,
                    name: &rel.name,
                    src: rel.src as usize,
                    dst: rel.dst as usize,
                    reverse: rel.reverse as usize,
                    csr: RelCsr {
                        src_start: maps.starts[rel.src as usize] as u32,
                        offsets: cast(&maps.offsets[r]),
                        indices: cast(&maps.indices[r]),
                    },
                }
            }
            _ => {
                assert_eq!(r, 0, "relation {r} of a one-relation store");
                let full = self.full();
                Relation {
                    id: 0,
                    name: DEFAULT_RELATION,
                    src: 0,
                    dst: 0,
                    reverse: 0,
                    csr: RelCsr {
                        src_start: 0,
                        offsets: full.offsets(),
                        indices: full.indices(),
                    },
                }
            }
        }
    }

    /// The relation `(src, name, dst)` by names, as OGB and PyG name an edge type.
    pub fn relation_index(&self, src: &str, name: &str, dst: &str) -> Option<usize> {
        (0..self.n_relations()).find(|&r| {
            let rel = self.relation(r);
            rel.name == name
                && self.node_type_name(rel.src) == src
                && self.node_type_name(rel.dst) == dst
        })
    }

    /// The relations whose source type is `src` and destination type `dst`.
    pub fn relations_between(&self, src: usize, dst: usize) -> Vec<usize> {
        (0..self.n_relations())
            .filter(|&r| {
                let rel = self.relation(r);
                rel.src == src && rel.dst == dst
            })
            .collect()
    }

    /// Path of a typed section's file by its file name.
    pub fn typed_section_path(&self, file: &str) -> std::path::PathBuf {
        self.path().join(file)
    }
}

/// `open`'s checks of a typed store: each relation's offsets (O(source count)) and their
/// checksums; nodes of unlabelled types without label or role.
pub(super) fn check_cheap(store: &GraphStore) -> Result<(), StoreError> {
    let Some(meta) = store.types() else {
        return Ok(());
    };
    for (r, rel) in meta.relations.iter().enumerate() {
        let csr = store.relation(r).csr;
        let path = store.typed_section_path(&rel.offsets.file);
        check_offsets(csr.offsets(), rel.n_entries)
            .map_err(|what| StoreError::corrupt(&path, &rel.offsets.name, what))?;
        let got = format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(bytemuck::cast_slice(csr.offsets()))
        );
        if got != rel.offsets.xxh3 {
            return Err(StoreError::corrupt(
                &path,
                &rel.offsets.name,
                format!(
                    "checksum mismatch, expected {}, got {got}",
                    rel.offsets.xxh3
                ),
            ));
        }
    }
    let labels = store.labels();
    let roles = store.roles();
    for (t, ty) in meta.node_types.iter().enumerate() {
        if ty.labelled {
            continue;
        }
        let range = store.type_range(t);
        if let Some(v) = range.clone().find(|&v| labels.is_labelled(v)) {
            return Err(StoreError::corrupt(
                store.section_path(SectionId::Labels),
                SectionId::Labels.name(),
                format!(
                    "node {v} is of type {:?}, which has no labels, but carries one",
                    ty.name
                ),
            ));
        }
        if let Some(v) = range.clone().find(|&v| roles[v as usize] != 0) {
            return Err(StoreError::corrupt(
                store.section_path(SectionId::Roles),
                SectionId::Roles.name(),
                format!(
                    "node {v} is of type {:?}, which has no labels, but has a role",
                    ty.name
                ),
            ));
        }
    }
    Ok(())
}

fn describe(found: &Found) -> String {
    let list: Vec<String> = found
        .first
        .iter()
        .map(|(u, v)| format!("({u}, {v})"))
        .collect();
    format!("{} entries, first: {}", found.count, list.join(", "))
}

/// A relation as a homogeneous [`Csr`] over rows `0..count(src)` (columns stay global):
/// what the generic finders walk. Row k of it is node `src_start + k`.
fn as_local(csr: RelCsr<'_>) -> Csr<'_> {
    Csr::new(csr.offsets(), csr.indices()).expect("offsets checked at open")
}

/// `check`'s verification of a typed store's sections; one message per problem.
/// `full_ok`: the full graph's rows are in range and sorted (its entries can be searched).
pub(crate) fn check_full(store: &GraphStore, full_ok: bool) -> Vec<String> {
    let Some(meta) = store.types() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    let mut report = |file: &str, section: &str, what: String| {
        problems.push(format!(
            "{}: section {section}: {what}",
            store.typed_section_path(file).display()
        ))
    };
    checksums(store, meta, &mut report);
    let rel_ok = relation_entries(store, meta, &mut report);
    reverses(store, meta, &rel_ok, &mut report);
    let orphans = if full_ok && rel_ok.iter().all(|&ok| ok) {
        union(store, meta, &mut report)
    } else {
        None
    };
    problems.extend(orphans);
    problems.extend(finite_features(store, meta));
    problems
}

/// How [`check_full`]'s rules report a problem: (section file, section name, what).
type Report<'a> = dyn FnMut(&str, &str, String) + 'a;

/// Checksums of the large sections (the offsets' were verified at open).
fn checksums(store: &GraphStore, meta: &TypesMeta, report: &mut Report<'_>) {
    let mut sums: Vec<(&str, &str, &str, &[u8])> = Vec::new();
    for (t, ty) in meta.node_types.iter().enumerate() {
        if let Some(e) = &ty.features {
            let data = store.type_features(t).data;
            sums.push((&e.file, &e.name, &e.xxh3, bytemuck::cast_slice(data)));
        }
    }
    for (r, rel) in meta.relations.iter().enumerate() {
        let data = store.relation(r).csr.indices();
        sums.push((
            &rel.indices.file,
            &rel.indices.name,
            &rel.indices.xxh3,
            bytemuck::cast_slice(data),
        ));
    }
    let got: Vec<String> = sums
        .par_iter()
        .map(|s| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(s.3)))
        .collect();
    for (s, got) in sums.iter().zip(got) {
        if *s.2 != got {
            report(
                s.0,
                s.1,
                format!("checksum mismatch, expected {}, got {got}", s.2),
            );
        }
    }
}

/// Each relation: indices in the destination type's range, rows strictly increasing, no
/// self loops. Whether each relation's entries are in range and sorted (searchable).
fn relation_entries(store: &GraphStore, meta: &TypesMeta, report: &mut Report<'_>) -> Vec<bool> {
    let mut rel_ok = vec![true; meta.relations.len()];
    for (r, rel) in meta.relations.iter().enumerate() {
        let relation = store.relation(r);
        let (file, name) = (&rel.indices.file, &rel.indices.name);
        let dst = store.type_range(relation.dst);
        let local = as_local(relation.csr);
        let start = relation.csr.src_start;
        let label = |what: &str| {
            format!(
                "relation ({}, {}, {}): {what}",
                meta.node_types[relation.src].name, rel.name, meta.node_types[relation.dst].name
            )
        };
        let out = find_entries(local, |_, v| !dst.contains(&v));
        if out.count > 0 {
            let mut f = out.clone();
            f.first.iter_mut().for_each(|e| e.0 += start);
            report(
                file,
                name,
                label(&format!(
                    "a destination not of type {:?} (expected ids {}..{}): {}",
                    meta.node_types[relation.dst].name,
                    dst.start,
                    dst.end,
                    describe(&f)
                )),
            );
            rel_ok[r] = false;
        }
        let unsorted = find_rows(local.n_nodes(), |k| {
            local.neighbors(k).windows(2).any(|w| w[0] >= w[1])
        });
        if unsorted.count > 0 {
            let rows: Vec<String> = unsorted
                .first
                .iter()
                .map(|(k, _)| (k + start).to_string())
                .collect();
            report(
                file,
                name,
                label(&format!(
                    "rows not strictly increasing (unsorted or duplicate entries): {} rows, first: {}",
                    unsorted.count,
                    rows.join(", ")
                )),
            );
            rel_ok[r] = false;
        }
        let loops = find_entries(local, |k, v| k + start == v);
        if loops.count > 0 {
            let mut f = loops.clone();
            f.first.iter_mut().for_each(|e| e.0 += start);
            report(file, name, label(&format!("self loops: {}", describe(&f))));
        }
    }
    rel_ok
}

/// Each relation the transpose of its reverse: every entry (u, v) of r has (v, u) in
/// reverse(r); with the entry counts equal (the header's validation), that makes them
/// transposes of each other.
fn reverses(store: &GraphStore, meta: &TypesMeta, rel_ok: &[bool], report: &mut Report<'_>) {
    for (r, rel) in meta.relations.iter().enumerate() {
        let rev = rel.reverse as usize;
        if !rel_ok[r] || !rel_ok[rev] {
            continue;
        }
        let (a, b) = (store.relation(r).csr, store.relation(rev).csr);
        let missing = find_entries(as_local(a), |k, v| {
            b.row(v).binary_search(&(k + a.src_start)).is_err()
        });
        if missing.count > 0 {
            let mut f = missing.clone();
            f.first.iter_mut().for_each(|e| e.0 += a.src_start);
            report(
                &rel.indices.file,
                &rel.indices.name,
                format!(
                    "relation {:?}: entries whose reverse is missing from its reverse relation {:?}: {}",
                    rel.name,
                    meta.relations[rev].name,
                    describe(&f)
                ),
            );
        }
    }
}

/// The full graph is the union of the relations: every relation entry is a full-graph
/// entry (each one's problem reported), and every full-graph entry (u, v) is in a
/// relation from u's type to v's (the message of those that are not).
fn union(store: &GraphStore, meta: &TypesMeta, report: &mut Report<'_>) -> Option<String> {
    let full = store.full();
    let fi = SectionId::FullIndices;
    for (r, rel) in meta.relations.iter().enumerate() {
        let a = store.relation(r).csr;
        let extra = find_entries(as_local(a), |k, v| {
            full.neighbors(k + a.src_start).binary_search(&v).is_err()
        });
        if extra.count > 0 {
            let mut f = extra.clone();
            f.first.iter_mut().for_each(|e| e.0 += a.src_start);
            report(
                &rel.indices.file,
                &rel.indices.name,
                format!(
                    "relation {:?}: entries absent from the full graph: {}",
                    rel.name,
                    describe(&f)
                ),
            );
        }
    }
    let n_types = meta.node_types.len();
    let mut between: Vec<Vec<usize>> = vec![Vec::new(); n_types * n_types];
    for (r, rel) in meta.relations.iter().enumerate() {
        between[rel.src as usize * n_types + rel.dst as usize].push(r);
    }
    let orphans = find_entries(full, |u, v| {
        let (s, d) = (store.node_type(u), store.node_type(v));
        !between[s * n_types + d]
            .iter()
            .any(|&r| store.relation(r).csr.row(u).binary_search(&v).is_ok())
    });
    (orphans.count > 0).then(|| {
        format!(
            "{}: section {}: full-graph entries in no relation between their ends' types: {}",
            store.section_path(fi).display(),
            fi.name(),
            describe(&orphans)
        )
    })
}

/// Finite features, per type: one message per type with a non-finite value.
fn finite_features(store: &GraphStore, meta: &TypesMeta) -> Vec<String> {
    let mut problems = Vec::new();
    for (t, ty) in meta.node_types.iter().enumerate() {
        let Some(e) = &ty.features else { continue };
        let tf = store.type_features(t);
        let f = tf.width;
        let bad = find_rows(ty.count as usize, |k| {
            tf.data[k as usize * f..(k as usize + 1) * f]
                .iter()
                .any(|x| !x.is_finite())
        });
        if bad.count > 0 {
            let rows: Vec<String> = bad
                .first
                .iter()
                .map(|(k, _)| (k + tf.start).to_string())
                .collect();
            problems.push(format!(
                "{}: section {}: type {:?}: non-finite values (NaN or ±inf) in {} rows, first: {}",
                store.typed_section_path(&e.file).display(),
                e.name,
                ty.name,
                bad.count,
                rows.join(", ")
            ));
        }
    }
    problems
}
