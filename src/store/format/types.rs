//! Issue 57: the header's `types` record of a typed store (node types as contiguous id
//! ranges, relations as CSRs with their reverses), its validation and the section names
//! the types use.

use serde::{Deserialize, Serialize};

use super::{check_entry, Dtype, Header, SectionEntry};

/// Most node types a store holds (names in the header; ids of a type are contiguous).
pub const MAX_NODE_TYPES: usize = 1 << 12;
/// Most relations a store holds (each is two sections).
pub const MAX_RELATIONS: usize = 1 << 12;
/// The longest node-type or relation name, in bytes.
pub const MAX_TYPE_NAME_BYTES: usize = 256;
/// The one node type of a homogeneous store, as the typed reader names it.
pub const DEFAULT_NODE_TYPE: &str = "node";
/// The one relation of a homogeneous store, as the typed reader names it.
pub const DEFAULT_RELATION: &str = "to";

/// The node and edge types of a typed store (issue 57; docs/FORMAT.md, "Typed stores").
///
/// Nodes of type t have the global ids `start(t)..start(t) + count(t)`, `start(t)` the sum
/// of the earlier types' counts, so the global CSR (`full`, `train`) is one homogeneous
/// graph over all nodes, the union of the relations. Each relation is its own CSR: rows the
/// source type's nodes (row k is node `start(src) + k`), columns global ids of the
/// destination type, rows strictly increasing. Every relation has a reverse (its entries
/// transposed; itself for a symmetric relation between nodes of one type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypesMeta {
    /// The node types, in id order.
    pub node_types: Vec<NodeTypeMeta>,
    /// The relations (edge types), by relation id.
    pub relations: Vec<RelationMeta>,
}

/// One node type of a typed store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeTypeMeta {
    /// The type's name (ogbn-mag's `paper`, `author`, ...).
    pub name: String,
    /// Nodes of the type.
    pub count: u64,
    /// Feature width F_t of the type; 0: the type has no features and no section.
    pub n_features: u64,
    /// The type's features, f32 × count·F_t row-major (`type<t>.features`); absent when
    /// F_t = 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<SectionEntry>,
    /// Whether the type's nodes may carry labels (and roles): the target types. Nodes of
    /// the other types have no label and no role.
    pub labelled: bool,
}

/// One relation (edge type) of a typed store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationMeta {
    /// The relation's name (`cites`, `rev_writes`).
    pub name: String,
    /// Source node type (index into `node_types`).
    pub src: u32,
    /// Destination node type.
    pub dst: u32,
    /// Entries (directed) of the relation.
    pub n_entries: u64,
    /// The relation whose entries are this one's transposed; itself for a symmetric
    /// relation (source type = destination type).
    pub reverse: u32,
    /// Row offsets over the source type's nodes, u64 × (count(src) + 1) (`rel<r>.offsets`).
    pub offsets: SectionEntry,
    /// Column indices, global ids of destination-type nodes, u32 × n_entries
    /// (`rel<r>.indices`).
    pub indices: SectionEntry,
}

/// Name and file of node type `t`'s feature section.
pub fn type_features_section(t: usize) -> (String, String) {
    (format!("type{t}.features"), format!("type{t}.features.f32"))
}

/// Names and files of relation `r`'s offsets and indices sections.
pub fn relation_sections(r: usize) -> [(String, String); 2] {
    [
        (format!("rel{r}.offsets"), format!("rel{r}.offsets.u64")),
        (format!("rel{r}.indices"), format!("rel{r}.indices.u32")),
    ]
}

/// Whether `name` is the file of a typed store's section (`type<t>.features.f32`,
/// `rel<r>.offsets.u64`, `rel<r>.indices.u32`).
pub fn is_typed_section_file(name: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.len() <= 6 && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(t) = name
        .strip_prefix("type")
        .and_then(|s| s.strip_suffix(".features.f32"))
    {
        return number(t);
    }
    name.strip_prefix("rel")
        .and_then(|s| {
            s.strip_suffix(".offsets.u64")
                .or_else(|| s.strip_suffix(".indices.u32"))
        })
        .is_some_and(number)
}

/// A node-type or relation name: non-empty, at most [`MAX_TYPE_NAME_BYTES`], printable,
/// without OGB's separator `___`, without `/`, `,` or whitespace (names become directory
/// names and CSV fields).
pub fn check_type_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an empty name".into());
    }
    if name.len() > MAX_TYPE_NAME_BYTES {
        return Err(format!(
            "a name of {} bytes, expected at most {MAX_TYPE_NAME_BYTES}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || matches!(c, '/' | '\\' | ','))
    {
        return Err(format!("name {name:?} holds {c:?}"));
    }
    if name.contains("___") {
        return Err(format!(
            "name {name:?} holds \"___\", the separator of <src>___<rel>___<dst>"
        ));
    }
    Ok(())
}

impl TypesMeta {
    /// The first global id of each type, and N at the end (types + 1 entries).
    pub fn starts(&self) -> Vec<u64> {
        let mut s = Vec::with_capacity(self.node_types.len() + 1);
        let mut at = 0u64;
        s.push(0);
        for t in &self.node_types {
            at = at.saturating_add(t.count);
            s.push(at);
        }
        s
    }

    /// The type's index by name.
    pub fn type_index(&self, name: &str) -> Option<usize> {
        self.node_types.iter().position(|t| t.name == name)
    }

    /// Checks the record against the store's counts: types and relations named once, the
    /// counts summing to N, features and labels per type, each relation's types, reverse
    /// and sections. The message is bare (the caller places it).
    pub fn validate(&self, header: &Header) -> Result<(), String> {
        let types = &self.node_types;
        if types.is_empty() || types.len() > MAX_NODE_TYPES {
            return Err(format!(
                "types: {} node types, expected 1..={MAX_NODE_TYPES}",
                types.len()
            ));
        }
        if self.relations.len() > MAX_RELATIONS {
            return Err(format!(
                "types: {} relations, expected at most {MAX_RELATIONS}",
                self.relations.len()
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for (t, ty) in types.iter().enumerate() {
            check_type_name(&ty.name).map_err(|e| format!("types: node type {t}: {e}"))?;
            if !names.insert(ty.name.as_str()) {
                return Err(format!("types: node type {:?} named twice", ty.name));
            }
            let (name, file) = type_features_section(t);
            match (&ty.features, ty.n_features) {
                (None, 0) => {}
                (Some(s), f) if f > 0 => {
                    check_entry(s, t, &name, &file, Dtype::F32, ty.count.saturating_mul(f))?
                }
                (Some(_), _) => {
                    return Err(format!(
                        "types: node type {:?} has a feature section but n_features = 0",
                        ty.name
                    ))
                }
                (None, f) => {
                    return Err(format!(
                        "types: node type {:?} has n_features = {f} but no feature section",
                        ty.name
                    ))
                }
            }
        }
        let total = types
            .iter()
            .try_fold(0u64, |a, t| a.checked_add(t.count))
            .ok_or("types: node counts overflow")?;
        if total != header.n_nodes {
            return Err(format!(
                "types: node counts sum to {total}, expected n_nodes = {}",
                header.n_nodes
            ));
        }
        if header.n_features != 0 {
            return Err(format!(
                "types: a typed store keeps its features per type, expected n_features = 0, got {}",
                header.n_features
            ));
        }
        if !types.iter().any(|t| t.labelled) && header.n_classes != 0 {
            return Err(format!(
                "types: no labelled node type, but n_classes = {}",
                header.n_classes
            ));
        }
        let mut triplets = std::collections::BTreeSet::new();
        let mut sum = 0u64;
        for (r, rel) in self.relations.iter().enumerate() {
            check_type_name(&rel.name).map_err(|e| format!("types: relation {r}: {e}"))?;
            let (s, d) = (rel.src as usize, rel.dst as usize);
            if s >= types.len() || d >= types.len() {
                return Err(format!(
                    "types: relation {:?}: node types {s} → {d}, expected < {}",
                    rel.name,
                    types.len()
                ));
            }
            if !triplets.insert((s, rel.name.as_str(), d)) {
                return Err(format!(
                    "types: relation ({}, {}, {}) listed twice",
                    types[s].name, rel.name, types[d].name
                ));
            }
            let Some(rev) = self.relations.get(rel.reverse as usize) else {
                return Err(format!(
                    "types: relation {:?}: reverse {}, expected < {}",
                    rel.name,
                    rel.reverse,
                    self.relations.len()
                ));
            };
            if rev.reverse as usize != r
                || rev.src != rel.dst
                || rev.dst != rel.src
                || rev.n_entries != rel.n_entries
            {
                return Err(format!(
                    "types: relation {:?} and its reverse {:?} disagree (each must name the other, with the types swapped and as many entries)",
                    rel.name, rev.name
                ));
            }
            if rel.reverse as usize == r && s != d {
                return Err(format!(
                    "types: relation {:?} is its own reverse between two types ({} → {})",
                    rel.name, types[s].name, types[d].name
                ));
            }
            let [(on, of), (iname, ifile)] = relation_sections(r);
            check_entry(&rel.offsets, r, &on, &of, Dtype::U64, types[s].count + 1)?;
            check_entry(&rel.indices, r, &iname, &ifile, Dtype::U32, rel.n_entries)?;
            sum = sum.saturating_add(rel.n_entries);
        }
        // The full graph is the relations' union: a pair in two relations is one entry.
        if sum < header.n_entries {
            return Err(format!(
                "types: the relations hold {sum} entries, fewer than the full graph's {}",
                header.n_entries
            ));
        }
        Ok(())
    }
}
