//! A store's link-prediction split (issue 52): the held-out positives of the validation
//! and test sets with their fixed negatives, as `split-edges` writes them
//! ([`split::split_edges`]), and the typed views the evaluation and, later, the training
//! loop read ([`GraphStore::link_split`]).
//!
//! Invariants of a split (docs/FORMAT.md, "Link split"): every positive (u, v) is an
//! undirected edge of the input store that is in neither stored graph (held out of message
//! passing), u ≠ v, no edge is a positive twice (in one set or across both); each positive's
//! K tail negatives v′ are distinct and ascending, ≠ u, and {u, v′} is no edge of the input (stored or
//! held out); the negative pairs (a, b) have a < b, are distinct within their set and are no
//! edge of the input. `open` checks what costs O(E) (the positives' and pairs' checksums and
//! ids < N, `check_cheap`); `check` checks the rest (`check_full`).
//!
//! A *given* split (`import ogb-link`, [`LinkMeta::given`]) holds a dataset's own
//! negatives as the dataset gives them: a set may have no tails (K = 0) or no pairs, its
//! pairs are a pool of any size P (not one per positive), and its negatives may repeat,
//! be self pairs or true edges (OGB draws them at random and its evaluator scores them as
//! drawn). Of those negatives the checks verify only ids < N and a ≤ b in each pair; its
//! positives are checked as any split's.

pub mod split;

use std::collections::HashSet;

use crate::store::format::{LinkMeta, LinkSectionId};
use crate::store::mmap::{Csr, GraphStore};
use crate::store::scan::{contains, find_rows};
use crate::store::StoreError;

/// Which held-out set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkSet {
    /// The validation positives.
    Val,
    /// The test positives.
    Test,
}

impl LinkSet {
    /// `val` or `test`.
    pub fn name(self) -> &'static str {
        match self {
            LinkSet::Val => "val",
            LinkSet::Test => "test",
        }
    }

    /// The set's three sections: positives, tail negatives, negative pairs.
    pub fn sections(self) -> [LinkSectionId; 3] {
        match self {
            LinkSet::Val => [
                LinkSectionId::ValPos,
                LinkSectionId::ValNeg,
                LinkSectionId::ValNegPairs,
            ],
            LinkSet::Test => [
                LinkSectionId::TestPos,
                LinkSectionId::TestNeg,
                LinkSectionId::TestNegPairs,
            ],
        }
    }
}

/// The link split of a store: its record in the header and one [`LinkEdges`] per set.
#[derive(Clone, Copy)]
pub struct LinkSplit<'a> {
    /// The header's record (counts, K, seed).
    pub meta: &'a LinkMeta,
    /// The validation set.
    pub val: LinkEdges<'a>,
    /// The test set.
    pub test: LinkEdges<'a>,
}

impl<'a> LinkSplit<'a> {
    /// The set `set`.
    pub fn set(&self, set: LinkSet) -> LinkEdges<'a> {
        match set {
            LinkSet::Val => self.val,
            LinkSet::Test => self.test,
        }
    }
}

/// One held-out set: E positives, each with K tail negatives, and P negative pairs (one
/// per positive from `split-edges`; a pool of any size, maybe 0, in a given split).
#[derive(Clone, Copy)]
pub struct LinkEdges<'a> {
    set: LinkSet,
    pos: &'a [u32],
    neg: &'a [u32],
    negpairs: &'a [u32],
    k: usize,
    n_nodes: u64,
    given: bool,
}

impl<'a> LinkEdges<'a> {
    /// Which set this is.
    pub fn set(&self) -> LinkSet {
        self.set
    }

    /// Number of positives E.
    pub fn len(&self) -> usize {
        self.pos.len() / 2
    }

    /// Whether the set holds no positive.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// Tail negatives per positive K (0: none, in a given split).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Number of negative pairs P.
    pub fn n_negpairs(&self) -> usize {
        self.negpairs.len() / 2
    }

    /// Whether the set's negatives are a dataset's own, stored as given (see the module
    /// comment).
    pub fn given(&self) -> bool {
        self.given
    }

    /// Positive `i` as (source u, tail v). Panics if `i ≥ E`.
    pub fn pos(&self, i: usize) -> (u32, u32) {
        (self.pos[2 * i], self.pos[2 * i + 1])
    }

    /// Negative pair `i` as (a, b), a < b (a ≤ b in a given split). Panics if `i ≥ P`.
    pub fn negpair(&self, i: usize) -> (u32, u32) {
        (self.negpairs[2 * i], self.negpairs[2 * i + 1])
    }

    /// The positives, flat: E × 2 (checked at open: ids < N).
    pub fn positives(&self) -> &'a [u32] {
        self.pos
    }

    /// The negative pairs, flat: P × 2 (checked at open: ids < N).
    pub fn negative_pairs(&self) -> &'a [u32] {
        self.negpairs
    }

    /// The tail negatives, flat: E × K, row i for positive i. Not checked at open (O(E·K)):
    /// readers that index by these ids use [`checked_tails`](Self::checked_tails).
    pub fn negatives(&self) -> &'a [u32] {
        self.neg
    }

    /// The K tail negatives of positive `i`, verified `< N` (O(K)); an error names the
    /// section on a damaged store that has not been through `check`.
    pub fn checked_tails(&self, i: usize) -> Result<&'a [u32], StoreError> {
        let row = self.neg.get(i * self.k..(i + 1) * self.k).ok_or_else(|| {
            StoreError::argument(format!(
                "positive {i} of the {} set out of range, expected < {}",
                self.set.name(),
                self.len()
            ))
        })?;
        if let Some(&bad) = row.iter().find(|&&t| u64::from(t) >= self.n_nodes) {
            return Err(StoreError::argument(format!(
                "section {}: negative {bad} of positive {i} out of range, expected < N = {} (corrupt store? run `saintflow check`)",
                self.set.sections()[1].name(),
                self.n_nodes
            )));
        }
        Ok(row)
    }
}

fn as_u32s(bytes: &[u8]) -> &[u32] {
    if bytes.is_empty() {
        // An empty section has no mapping, and `&[]` of u8 need not be aligned for u32.
        return &[];
    }
    // Cannot fail: mappings are page-aligned and the length was checked against the
    // validated header (a whole number of u32s) when the section was mapped.
    bytemuck::cast_slice(bytes)
}

impl GraphStore {
    /// The store's link split (`split-edges`), or `None` for a store without one (the
    /// common case).
    pub fn link_split(&self) -> Option<LinkSplit<'_>> {
        let meta = self.header().link.as_ref()?;
        let bytes = |id| self.link_section_bytes(id).map(as_u32s).unwrap_or(&[]);
        let edges = |set: LinkSet| {
            let [p, n, q] = set.sections();
            LinkEdges {
                set,
                pos: bytes(p),
                neg: bytes(n),
                negpairs: bytes(q),
                k: meta.negatives as usize,
                n_nodes: self.header().n_nodes,
                given: meta.given,
            }
        };
        Some(LinkSplit {
            meta,
            val: edges(LinkSet::Val),
            test: edges(LinkSet::Test),
        })
    }
}

/// What `open` checks of a link split, O(E): the checksums of the positives and negative
/// pairs, their ids < N, u ≠ v, and a < b in each pair.
pub(crate) fn check_cheap(store: &GraphStore) -> Result<(), StoreError> {
    let Some(meta) = &store.header().link else {
        return Ok(());
    };
    let n = store.header().n_nodes;
    for id in LinkSectionId::ALL.into_iter().filter(|id| id.is_small()) {
        let bad = |what: String| StoreError::corrupt(store.link_section_path(id), id.name(), what);
        let bytes = store.link_section_bytes(id).unwrap_or(&[]);
        let want = &meta.section(id).xxh3;
        let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes));
        if *want != got {
            return Err(bad(format!(
                "checksum mismatch, expected {want}, got {got}"
            )));
        }
        let pairs = as_u32s(bytes);
        for (i, p) in pairs.chunks_exact(2).enumerate() {
            let (a, b) = (p[0], p[1]);
            if u64::from(a.max(b)) >= n {
                return Err(bad(format!(
                    "pair {i} ({a}, {b}): node id out of range, expected < N = {n}"
                )));
            }
            let is_negpair = matches!(id, LinkSectionId::ValNegPairs | LinkSectionId::TestNegPairs);
            if a == b && !(is_negpair && meta.given) {
                return Err(bad(format!("pair {i} ({a}, {b}) is a self pair")));
            }
            if is_negpair && a > b {
                return Err(bad(format!(
                    "pair {i} ({a}, {b}): expected the smaller id first"
                )));
            }
        }
    }
    Ok(())
}

/// Key of an unordered pair.
fn key(u: u32, v: u32) -> u64 {
    let (a, b) = if u < v { (u, v) } else { (v, u) };
    (u64::from(a) << 32) | u64::from(b)
}

/// Problems found in a link split (the checks `open` leaves, see the module comment), each
/// formatted `<file>: section <name>: <what>`; `graph_ok` says whether the stored graph's
/// rows are in range and sorted (else the edge tests are skipped).
pub(crate) fn check_full(store: &GraphStore, graph_ok: bool) -> Vec<String> {
    let Some(split) = store.link_split() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    let mut report = |id: LinkSectionId, what: String| {
        problems.push(format!(
            "{}: section {}: {what}",
            store.link_section_path(id).display(),
            id.name()
        ))
    };
    for id in [LinkSectionId::ValNeg, LinkSectionId::TestNeg] {
        let want = &split.meta.section(id).xxh3;
        let bytes = store.link_section_bytes(id).unwrap_or(&[]);
        let got = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes));
        if *want != got {
            report(id, format!("checksum mismatch, expected {want}, got {got}"));
        }
    }
    let mut positives = HashSet::new();
    for set in [LinkSet::Val, LinkSet::Test] {
        let e = split.set(set);
        let [p, _, _] = set.sections();
        for i in 0..e.len() {
            let (u, v) = e.pos(i);
            if !positives.insert(key(u, v)) {
                report(p, format!("positive {i} ({u}, {v}) is held out twice"));
            }
        }
    }
    let (full, train) = (store.full(), store.train());
    for set in [LinkSet::Val, LinkSet::Test] {
        check_set(
            split.set(set),
            full,
            train,
            graph_ok,
            &positives,
            &mut report,
        );
    }
    problems
}

/// The checks of one set; see [`check_full`]. The tails (O(E·K·log d)) are checked in
/// parallel over blocks of positives; the first few problems of each section are listed
/// with the count.
fn check_set(
    e: LinkEdges<'_>,
    full: Csr<'_>,
    train: Csr<'_>,
    graph_ok: bool,
    positives: &HashSet<u64>,
    report: &mut impl FnMut(LinkSectionId, String),
) {
    let [p, n, q] = e.set.sections();
    let edge = |u: u32, v: u32| graph_ok && (contains(full, u, v) || contains(train, u, v));
    let pos_problem = |i: usize| {
        let (u, v) = e.pos(i);
        edge(u, v).then(|| format!("positive {i} ({u}, {v}) is in the stored graph"))
    };
    let tail_problem = |i: usize| {
        let u = e.pos(i).0;
        let row = &e.neg[i * e.k..(i + 1) * e.k];
        row.iter().enumerate().find_map(|(j, &t)| {
            let what = if u64::from(t) >= e.n_nodes {
                "out of range"
            } else if e.given {
                // A dataset's own negatives, as given: only their range is checked.
                return None;
            } else if t == u {
                "a self pair"
            } else if edge(u, t) {
                "a stored edge"
            } else if positives.contains(&key(u, t)) {
                "a held-out positive"
            } else if j > 0 && row[j - 1] >= t {
                "not above the one before (the tails are distinct and ascending)"
            } else {
                return None;
            };
            Some(format!(
                "negative {j} of positive {i}: ({u}, {t}) is {what}"
            ))
        })
    };
    let pair_problem = |i: usize| {
        let (a, b) = e.negpair(i);
        (!e.given && (edge(a, b) || positives.contains(&key(a, b))))
            .then(|| format!("negative pair {i} ({a}, {b}) is an edge"))
    };
    let mut list = |id: LinkSectionId,
                    what: &str,
                    rows: usize,
                    problem: &(dyn Fn(usize) -> Option<String> + Sync)| {
        let found = find_rows(rows, |i| problem(i as usize).is_some());
        if found.count > 0 {
            let first: Vec<String> = found
                .first
                .iter()
                .filter_map(|&(i, _)| problem(i as usize))
                .collect();
            report(
                id,
                format!("{} {what}, first: {}", found.count, first.join("; ")),
            );
        }
    };
    list(p, "positives in the stored graph", e.len(), &pos_problem);
    list(
        n,
        "positives with a bad tail negative",
        e.len(),
        &tail_problem,
    );
    list(
        q,
        "negative pairs that are edges",
        e.n_negpairs(),
        &pair_problem,
    );
    if e.given {
        return;
    }
    let mut pairs = HashSet::with_capacity(e.n_negpairs());
    let twice: Vec<String> = (0..e.n_negpairs())
        .filter(|&i| !pairs.insert(key(e.negpair(i).0, e.negpair(i).1)))
        .map(|i| format!("negative pair {i} {:?} is drawn twice", e.negpair(i)))
        .collect();
    if !twice.is_empty() {
        let first = &twice[..twice.len().min(5)];
        report(
            q,
            format!(
                "{} negative pairs drawn twice, first: {}",
                twice.len(),
                first.join("; ")
            ),
        );
    }
}
