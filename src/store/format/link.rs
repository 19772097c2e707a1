//! Issue 52: the header's `edge_time` record and `link` record (a link split's sets, its
//! six u32 sections, a time split), each validated against the graph's counts.

use serde::{Deserialize, Serialize};

use super::SectionEntry;

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
