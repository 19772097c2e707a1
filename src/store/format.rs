//! On-disk layout of a store: the header file and the section files (see docs/FORMAT.md).
//!
//! A store is a directory. `header.sf` holds an 24-byte binary prefix (magic, version, body
//! length, xxh3-64 of the body) and a JSON body describing the graph and listing every
//! section with its dtype, element count, byte length and xxh3-64 checksum. Each section is
//! a file of raw little-endian elements starting at byte 0, so a page-aligned mmap of it is
//! a correctly aligned slice.

use serde::{Deserialize, Serialize};

use crate::store::StoreError;
use std::path::Path;

/// First 8 bytes of `header.sf`.
pub const MAGIC: [u8; 8] = *b"SAINTFLW";
/// The format version this build writes and the only one it reads.
pub const VERSION: u32 = 1;
/// Name of the header file inside a store directory.
pub const HEADER_FILE: &str = "header.sf";
/// A part store's id map (written by `partition`), beside the sections.
pub const PART_MAP_FILE: &str = "part.tsv";
/// The id mapping of a store imported with `remap` (written by the edge-list importer).
pub const IDS_FILE: &str = "ids.tsv";
/// Bytes of the binary prefix before the JSON body.
pub const PREFIX_BYTES: usize = 24;
/// A header body larger than this is rejected before it is read (a hostile length field).
pub const MAX_BODY_BYTES: u32 = 1 << 20;
/// Single-label value of a node that has no label.
pub const NO_LABEL: u32 = u32::MAX;

/// Issue 28: class ids are below this (10⁹): a class count beyond it is a mistake (a
/// stray id in a label file, `--classes 1000000000`), refused by `gen`, the importers and
/// [`Header::validate`] rather than sized into output layers and label bitmaps.
pub const MAX_CLASSES: u64 = 1_000_000_000;
/// Largest node count the u32 index format can hold: ids are `0..N` with `N ≤ 2^32 − 1`
/// (u32::MAX stays free as the "no label" / "no node" sentinel). Larger graphs need a
/// format version with u64 indices; every writer refuses them with an error.
pub const MAX_NODES: u64 = u32::MAX as u64;

/// Element type of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// Unsigned byte.
    U8,
    /// Little-endian u32.
    U32,
    /// Little-endian u64.
    U64,
    /// Little-endian IEEE-754 binary32.
    F32,
    /// Little-endian two's-complement i64 (the edge times, [`TimeMeta`]).
    I64,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Dtype::U8 => 1,
            Dtype::U32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 => 8,
        }
    }
}

/// How labels are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelKind {
    /// One class id per node (u32; [`NO_LABEL`] for an unlabelled node).
    Single,
    /// A bit row of ⌈C/8⌉ bytes per node; bit `c % 8` of byte `c / 8` is class `c`.
    Multi,
}

/// Where the training graph came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainGraph {
    /// Induced on the training nodes: exactly the full graph's edges whose two ends are
    /// training nodes (GraphSAINT semantics). `check` verifies this.
    Induced,
    /// Taken as given by a dataset (GraphSAINT's `adj_train.npz`); `check` verifies only
    /// that it is a symmetric subgraph of the full graph.
    Given,
}

/// Role of a node in the split, one byte per node in the `roles` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    /// In no split (e.g. Cora's nodes 640..1707).
    None = 0,
    /// Training node.
    Train = 1,
    /// Validation node.
    Val = 2,
    /// Test node.
    Test = 3,
}

impl Role {
    /// Decodes a role byte; `None` for a byte outside 0..=3.
    pub fn from_byte(b: u8) -> Option<Role> {
        match b {
            0 => Some(Role::None),
            1 => Some(Role::Train),
            2 => Some(Role::Val),
            3 => Some(Role::Test),
            _ => None,
        }
    }
}

/// Node counts per role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitCounts {
    /// Training nodes.
    pub train: u64,
    /// Validation nodes.
    pub val: u64,
    /// Test nodes.
    pub test: u64,
}

/// The sections every store has, in header order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectionId {
    /// Row offsets of the full graph, u64, N+1.
    FullOffsets,
    /// Column indices of the full graph, u32, nnz.
    FullIndices,
    /// Row offsets of the training graph, u64, N+1.
    TrainOffsets,
    /// Column indices of the training graph, u32, nnz_train.
    TrainIndices,
    /// Node features, f32, N×F row-major.
    Features,
    /// Labels: u32 × N (single) or u8 × N·⌈C/8⌉ (multi).
    Labels,
    /// Roles, u8 × N.
    Roles,
}

impl SectionId {
    /// All sections in header order.
    pub const ALL: [SectionId; 7] = [
        SectionId::FullOffsets,
        SectionId::FullIndices,
        SectionId::TrainOffsets,
        SectionId::TrainIndices,
        SectionId::Features,
        SectionId::Labels,
        SectionId::Roles,
    ];

    /// The section's name in the header and in messages.
    pub fn name(self) -> &'static str {
        match self {
            SectionId::FullOffsets => "full.offsets",
            SectionId::FullIndices => "full.indices",
            SectionId::TrainOffsets => "train.offsets",
            SectionId::TrainIndices => "train.indices",
            SectionId::Features => "features",
            SectionId::Labels => "labels",
            SectionId::Roles => "roles",
        }
    }

    /// The section's file name inside the store directory.
    pub fn file_name(self) -> &'static str {
        match self {
            SectionId::FullOffsets => "full.offsets.u64",
            SectionId::FullIndices => "full.indices.u32",
            SectionId::TrainOffsets => "train.offsets.u64",
            SectionId::TrainIndices => "train.indices.u32",
            SectionId::Features => "features.f32",
            SectionId::Labels => "labels.bin",
            SectionId::Roles => "roles.u8",
        }
    }

    /// Position in [`SectionId::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One section's entry in the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionEntry {
    /// Section name ([`SectionId::name`]).
    pub name: String,
    /// File name inside the store directory.
    pub file: String,
    /// Element type.
    pub dtype: Dtype,
    /// Number of elements.
    pub len: u64,
    /// Number of bytes (`len × dtype.size()`); the file has exactly this length.
    pub bytes: u64,
    /// xxh3-64 of the file's bytes, as 16 lowercase hex digits.
    pub xxh3: String,
}

/// The JSON body of `header.sf`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Number of nodes N.
    pub n_nodes: u64,
    /// Directed entries (CSR nnz) of the full graph: twice its undirected edges.
    pub n_entries: u64,
    /// Directed entries of the training graph.
    pub n_train_entries: u64,
    /// Feature width F.
    pub n_features: u64,
    /// Number of classes C.
    pub n_classes: u64,
    /// Label layout.
    pub label_kind: LabelKind,
    /// Provenance of the training graph.
    pub train_graph: TrainGraph,
    /// Role counts.
    pub split: SplitCounts,
    /// The seven sections, in [`SectionId::ALL`] order.
    pub sections: Vec<SectionEntry>,
    /// Free-form description of where the store came from (importer and source, or the
    /// generator and its parameters). Never a timestamp: equal inputs give equal stores.
    pub source: String,
    /// The link-prediction split (`split-edges`), absent from most stores: absent, the
    /// field is not written, so a store without one has the header it always had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkMeta>,
    /// Edge times (issue 52: a time split needs them), absent from most stores: absent,
    /// the field is not written, so a store without times has the header it always had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_time: Option<TimeMeta>,
    /// Node and edge types (issue 57), absent from a homogeneous store: absent, the field
    /// is not written, so every store without types has the header it always had (the
    /// one-type case); a build older than the types refuses a typed store (unknown field
    /// `types`) rather than read its relations as one graph without saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<TypesMeta>,
}

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

/// The edge-time section: one i64 per entry of the full graph's CSR, aligned with
/// `full.indices` (entry j of row u is the edge (u, `full.indices[j]`), its time is
/// `full.time[j]`); both entries of an undirected edge carry the same time. An importer
/// that meets an edge several times (both directions listed, duplicates, ogbl-collab's
/// one line per year) keeps the **earliest** time.
pub const TIME_SECTION: (&str, &str) = ("full.time", "full.time.i64");

/// The header's record of the edge times (`import edgelist --time-column`, `import
/// ogb-link` with `raw/edge_year.csv.gz`, and what `split-edges` keeps of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeMeta {
    /// What a time counts (`year` for OGB's `edge_year`); absent: not said (an edge
    /// list's column, whatever integer it holds: seconds, days, years).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Earliest time over the entries (0 for a graph without edges); `check` verifies it.
    pub min: i64,
    /// Latest time over the entries (0 for a graph without edges); `check` verifies it.
    pub max: i64,
    /// The section (`full.time`, `full.time.i64`, dtype `i64`, n_entries elements).
    pub section: SectionEntry,
}

/// The link sections of a store written by `split-edges`, in header order
/// ([`LinkMeta::sections`]). `E` is the split's positives, `K` the negatives per positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSectionId {
    /// Validation positives (u, v), u32 × E_val·2, sorted.
    ValPos,
    /// Validation tail negatives, u32 × E_val·K: row i holds K v' for positive i's u.
    ValNeg,
    /// Validation negative pairs (a, b), a < b, u32 × P_val·2: one per positive
    /// (`split-edges`), or the dataset's pool (`import ogb-link`, [`LinkMeta::val_negpairs`]).
    ValNegPairs,
    /// Test positives, as [`LinkSectionId::ValPos`].
    TestPos,
    /// Test tail negatives, as [`LinkSectionId::ValNeg`].
    TestNeg,
    /// Test negative pairs, as [`LinkSectionId::ValNegPairs`].
    TestNegPairs,
}

impl LinkSectionId {
    /// All link sections in header order.
    pub const ALL: [LinkSectionId; 6] = [
        LinkSectionId::ValPos,
        LinkSectionId::ValNeg,
        LinkSectionId::ValNegPairs,
        LinkSectionId::TestPos,
        LinkSectionId::TestNeg,
        LinkSectionId::TestNegPairs,
    ];

    /// The section's name in the header and in messages.
    pub fn name(self) -> &'static str {
        match self {
            LinkSectionId::ValPos => "link.val.pos",
            LinkSectionId::ValNeg => "link.val.neg",
            LinkSectionId::ValNegPairs => "link.val.negpairs",
            LinkSectionId::TestPos => "link.test.pos",
            LinkSectionId::TestNeg => "link.test.neg",
            LinkSectionId::TestNegPairs => "link.test.negpairs",
        }
    }

    /// The section's file name inside the store directory.
    pub fn file_name(self) -> &'static str {
        match self {
            LinkSectionId::ValPos => "link.val.pos.u32",
            LinkSectionId::ValNeg => "link.val.neg.u32",
            LinkSectionId::ValNegPairs => "link.val.negpairs.u32",
            LinkSectionId::TestPos => "link.test.pos.u32",
            LinkSectionId::TestNeg => "link.test.neg.u32",
            LinkSectionId::TestNegPairs => "link.test.negpairs.u32",
        }
    }

    /// Position in [`LinkSectionId::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the section is O(E) (positives, negative pairs), read whole by `open`; the
    /// tail negatives are O(E·K) and only `check` reads them whole.
    pub fn is_small(self) -> bool {
        !matches!(self, LinkSectionId::ValNeg | LinkSectionId::TestNeg)
    }
}

/// The header's record of a link-prediction split (`saintflow split-edges`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkMeta {
    /// Validation positives E_val (undirected edges held out of both graphs).
    pub n_val: u64,
    /// Test positives E_test.
    pub n_test: u64,
    /// Tail negatives per positive K; 0 only in a given split without tails
    /// (`import ogb-link` of a collab-style dataset: its link.*.neg sections are empty).
    pub negatives: u64,
    /// Negative pairs of the validation set P_val; absent: one per positive (E_val, as
    /// `split-edges` draws them), so a store written before this field reads as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_negpairs: Option<u64>,
    /// Negative pairs of the test set P_test; absent: E_test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_negpairs: Option<u64>,
    /// The split and its negatives are a dataset's own (`import ogb-link`), stored as
    /// given: its negatives may repeat or be true edges (OGB's evaluators score them as
    /// given), so `check` verifies of them only their range and each pair's a ≤ b; `seed`
    /// and `allow_isolated` do not apply (0 and false). Absent: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub given: bool,
    /// The seed of the split and of every negative.
    pub seed: u64,
    /// Whether edges were held out even when that left a node without edges.
    pub allow_isolated: bool,
    /// Undirected edges of the input store's full graph (the stored graph's plus the
    /// held-out ones).
    pub input_edges: u64,
    /// A time split (`split-edges --by-time`): the latest edges held out. Absent (not
    /// written): the split is random (or given), and its header reads as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_time: Option<TimeSplit>,
    /// The six link sections, in [`LinkSectionId::ALL`] order.
    pub sections: Vec<SectionEntry>,
}

/// The record of a time split (`split-edges --by-time`, [`LinkMeta::by_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeSplit {
    /// Edges visited (latest first) before the split was complete but kept in the graph
    /// by the never-isolate rule, although their time put them in validation or test.
    /// `check` verifies it against the stored times: the stored edges later than the
    /// earliest held-out time are at most this many, and those at that time or later at
    /// least this many.
    pub kept: u64,
    /// Earliest and latest time of the validation positives; absent for an empty set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_time: Option<[i64; 2]>,
    /// Earliest and latest time of the test positives; absent for an empty set. The
    /// test set is the latest: its earliest time is at least validation's latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_time: Option<[i64; 2]>,
}

impl TimeSplit {
    /// The earliest held-out time (validation's, else test's), if anything is held out.
    pub fn earliest(&self) -> Option<i64> {
        self.val_time.or(self.test_time).map(|t| t[0])
    }
}

impl LinkMeta {
    /// The entry of link section `id`.
    pub fn section(&self, id: LinkSectionId) -> &SectionEntry {
        &self.sections[id.index()]
    }

    /// Negative pairs of the validation set (P_val): `val_negpairs`, else E_val.
    pub fn n_val_negpairs(&self) -> u64 {
        self.val_negpairs.unwrap_or(self.n_val)
    }

    /// Negative pairs of the test set (P_test): `test_negpairs`, else E_test.
    pub fn n_test_negpairs(&self) -> u64 {
        self.test_negpairs.unwrap_or(self.n_test)
    }

    /// The expected element count of each link section (all u32), from the counts.
    pub fn expected_len(&self, id: LinkSectionId) -> u64 {
        match id {
            LinkSectionId::ValPos => self.n_val.saturating_mul(2),
            LinkSectionId::TestPos => self.n_test.saturating_mul(2),
            LinkSectionId::ValNegPairs => self.n_val_negpairs().saturating_mul(2),
            LinkSectionId::TestNegPairs => self.n_test_negpairs().saturating_mul(2),
            LinkSectionId::ValNeg => self.n_val.saturating_mul(self.negatives),
            LinkSectionId::TestNeg => self.n_test.saturating_mul(self.negatives),
        }
    }
}

impl Header {
    /// Bytes per label row: 4 for single-label, ⌈C/8⌉ for multi-label.
    pub fn label_row_bytes(&self) -> u64 {
        match self.label_kind {
            LabelKind::Single => 4,
            LabelKind::Multi => self.n_classes.div_ceil(8),
        }
    }

    /// The expected (dtype, len) of each section, derived from the counts.
    pub fn expected_shape(&self, id: SectionId) -> (Dtype, u64) {
        let n = self.n_nodes;
        match id {
            SectionId::FullOffsets | SectionId::TrainOffsets => (Dtype::U64, n + 1),
            SectionId::FullIndices => (Dtype::U32, self.n_entries),
            SectionId::TrainIndices => (Dtype::U32, self.n_train_entries),
            SectionId::Features => (Dtype::F32, n.saturating_mul(self.n_features)),
            SectionId::Labels => match self.label_kind {
                LabelKind::Single => (Dtype::U32, n),
                LabelKind::Multi => (Dtype::U8, n.saturating_mul(self.label_row_bytes())),
            },
            SectionId::Roles => (Dtype::U8, n),
        }
    }

    /// The entry of section `id`.
    pub fn section(&self, id: SectionId) -> &SectionEntry {
        &self.sections[id.index()]
    }

    /// Checks that the header is self-consistent: the seven sections in order with the
    /// dtypes, lengths and file names the counts imply. `path` is the header file.
    pub fn validate(&self, path: &Path) -> Result<(), StoreError> {
        let bad = |what: String| Err(StoreError::corrupt(path, "header", what));
        if self.n_nodes > MAX_NODES {
            return bad(format!(
                "n_nodes = {} exceeds the u32 index limit {MAX_NODES}",
                self.n_nodes
            ));
        }
        if self.sections.len() != SectionId::ALL.len() {
            return bad(format!(
                "expected {} sections, got {}",
                SectionId::ALL.len(),
                self.sections.len()
            ));
        }
        if self.n_classes >= MAX_CLASSES {
            return bad(format!(
                "n_classes = {} too large, expected < {MAX_CLASSES}",
                self.n_classes
            ));
        }
        let split_total = self.split.train + self.split.val + self.split.test;
        if split_total > self.n_nodes {
            return bad(format!(
                "split counts sum to {split_total}, more than n_nodes = {}",
                self.n_nodes
            ));
        }
        for id in SectionId::ALL {
            let s = self.section(id);
            let (dtype, len) = self.expected_shape(id);
            check_entry(s, id.index(), id.name(), id.file_name(), dtype, len).or_else(bad)?;
        }
        if let Some(link) = &self.link {
            self.validate_link(link).or_else(bad)?;
        }
        if let Some(t) = &self.edge_time {
            let (name, file) = TIME_SECTION;
            check_entry(&t.section, 0, name, file, Dtype::I64, self.n_entries).or_else(bad)?;
            if t.min > t.max {
                return bad(format!("edge_time: min {} above max {}", t.min, t.max));
            }
        }
        if let Some(types) = &self.types {
            types.validate(self).or_else(bad)?;
        }
        Ok(())
    }

    /// The link record's counts against the graph's, and its six sections.
    fn validate_link(&self, link: &LinkMeta) -> Result<(), String> {
        if link.sections.len() != LinkSectionId::ALL.len() {
            return Err(format!(
                "link: expected {} sections, got {}",
                LinkSectionId::ALL.len(),
                link.sections.len()
            ));
        }
        if link.negatives == 0 && !link.given {
            return Err(
                "link: negatives expected ≥ 1, got 0 (only a given split may lack tail negatives)"
                    .into(),
            );
        }
        let held = link.n_val.saturating_add(link.n_test);
        if link.input_edges != (self.n_entries / 2).saturating_add(held) {
            return Err(format!(
                "link: input_edges expected stored {} + held out {held}, got {}",
                self.n_entries / 2,
                link.input_edges
            ));
        }
        for id in LinkSectionId::ALL {
            let s = link.section(id);
            let len = link.expected_len(id);
            check_entry(s, id.index(), id.name(), id.file_name(), Dtype::U32, len)?;
        }
        if let Some(ts) = &link.by_time {
            if self.edge_time.is_none() {
                return Err("link: a time split (by_time) in a store without edge_time".into());
            }
            if link.given {
                return Err("link: a given split cannot be a time split (by_time)".into());
            }
            for (what, range, n) in [
                ("val_time", ts.val_time, link.n_val),
                ("test_time", ts.test_time, link.n_test),
            ] {
                match range {
                    Some([a, b]) if a > b => {
                        return Err(format!("link: {what} [{a}, {b}]: earliest above latest"))
                    }
                    Some(_) if n == 0 => {
                        return Err(format!("link: {what} given for an empty set"))
                    }
                    None if n > 0 => {
                        return Err(format!("link: {what} missing for a set of {n} positives"))
                    }
                    _ => {}
                }
            }
            if let (Some(v), Some(t)) = (ts.val_time, ts.test_time) {
                if t[0] < v[1] {
                    return Err(format!(
                        "link: test_time starts at {}, before val_time ends at {} (the test set is the latest)",
                        t[0], v[1]
                    ));
                }
            }
            if ts.kept > self.n_entries / 2 {
                return Err(format!(
                    "link: by_time.kept {} above the stored {} edges",
                    ts.kept,
                    self.n_entries / 2
                ));
            }
        }
        Ok(())
    }
}

/// One section entry against the name, file, dtype and length the counts imply.
fn check_entry(
    s: &SectionEntry,
    index: usize,
    name: &str,
    file: &str,
    dtype: Dtype,
    len: u64,
) -> Result<(), String> {
    if s.name != name || s.file != file {
        return Err(format!(
            "section {index} expected name {name:?} in file {file:?}, got {:?} in {:?}",
            s.name, s.file
        ));
    }
    if s.dtype != dtype || s.len != len {
        return Err(format!(
            "section {}: expected {len} × {dtype:?}, got {} × {:?}",
            s.name, s.len, s.dtype
        ));
    }
    if s.bytes != len.saturating_mul(dtype.size()) {
        return Err(format!(
            "section {}: expected {} bytes, got {}",
            s.name,
            len.saturating_mul(dtype.size()),
            s.bytes
        ));
    }
    if s.xxh3.len() != 16 || u64::from_str_radix(&s.xxh3, 16).is_err() {
        return Err(format!(
            "section {}: checksum {:?} is not 16 hex digits",
            s.name, s.xxh3
        ));
    }
    Ok(())
}

/// Serialises the header file: prefix + JSON body.
pub fn encode_header(header: &Header) -> Vec<u8> {
    let body = serde_json::to_vec_pretty(header).expect("header serialises");
    let mut out = Vec::with_capacity(PREFIX_BYTES + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Parses and validates a header file's bytes; `path` names it in errors.
pub fn decode_header(bytes: &[u8], path: &Path) -> Result<Header, StoreError> {
    let bad = |what: String| StoreError::corrupt(path, "header", what);
    if bytes.len() < PREFIX_BYTES {
        return Err(bad(format!(
            "file is {} bytes, shorter than the {PREFIX_BYTES}-byte prefix",
            bytes.len()
        )));
    }
    if bytes[..8] != MAGIC {
        return Err(bad(format!(
            "wrong magic, expected {:?}, got {:?} (not a saintflow store?)",
            String::from_utf8_lossy(&MAGIC),
            String::from_utf8_lossy(&bytes[..8])
        )));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(bad(format!(
            "unsupported format version, expected {VERSION}, got {version}"
        )));
    }
    let body_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    if body_len > MAX_BODY_BYTES {
        return Err(bad(format!(
            "body length {body_len} exceeds the limit {MAX_BODY_BYTES}"
        )));
    }
    let body = &bytes[PREFIX_BYTES..];
    if body.len() != body_len as usize {
        return Err(bad(format!(
            "body length expected {body_len} bytes, got {} (truncated or extended)",
            body.len()
        )));
    }
    let want = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    let got = xxhash_rust::xxh3::xxh3_64(body);
    if want != got {
        return Err(bad(format!(
            "checksum mismatch, expected {want:016x}, got {got:016x}"
        )));
    }
    let header: Header = serde_json::from_slice(body)
        .map_err(|e| bad(format!("body is not a valid header: {e}")))?;
    header.validate(path)?;
    Ok(header)
}
