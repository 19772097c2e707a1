//! On-disk layout of a store: the header file and the section files (see docs/FORMAT.md).
//!
//! A store is a directory. `header.sf` holds an 24-byte binary prefix (magic, version, body
//! length, xxh3-64 of the body) and a JSON body describing the graph and listing every
//! section with its dtype, element count, byte length and xxh3-64 checksum. Each section is
//! a file of raw little-endian elements starting at byte 0, so a page-aligned mmap of it is
//! a correctly aligned slice.
//!
//! Here the header and its sections; the optional records in their own files: `types`
//! (typed stores) in types.rs, `edge_time` and `link` in link.rs.

use serde::{Deserialize, Serialize};

use crate::store::StoreError;
use std::path::Path;

mod link;
mod types;

pub use link::{LinkMeta, LinkSectionId, TimeMeta, TimeSplit, TIME_SECTION};
pub use types::{
    check_type_name, is_typed_section_file, relation_sections, type_features_section, NodeTypeMeta,
    RelationMeta, TypesMeta, DEFAULT_NODE_TYPE, DEFAULT_RELATION, MAX_NODE_TYPES, MAX_RELATIONS,
    MAX_TYPE_NAME_BYTES,
};

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
