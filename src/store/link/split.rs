//! `split-edges`: a new store whose graph is the input's minus held-out validation and
//! test edges, with fixed, seeded evaluation negatives (docs/FORMAT.md, "Link split").
//!
//! * **Which edges.** Every undirected edge {u, v} of the input's full graph gets a key
//!   `hash3(seed, LINK_SPLIT, u·2³² + v)` (u < v); edges are visited in key order and one
//!   is held out while both its ends keep degree ≥ 1 afterwards (any edge with
//!   `allow_isolated`), until ⌊val·M⌋ + ⌊test·M⌋ are held out (M = the input's undirected
//!   edges): the first ⌊val·M⌋ taken are validation edges, the rest test edges. Too few
//!   eligible edges is an error naming the numbers (never a smaller split). Each positive
//!   is oriented (u, v) or (v, u) by one bit of its key; the tails replace v.
//! * **Tail negatives** (OGB's ogbl-citation2 protocol): per positive (u, v), K distinct
//!   v′ drawn uniformly from the nodes that are not u and not a neighbour of u in the
//!   input's full graph (the held-out edges included), by Floyd's algorithm over the ranks
//!   of those candidates (O(K log d), no rejection), stored ascending; positive i of a set
//!   draws from `hash3(seed, LINK_NEGATIVES, set·2⁴⁸ + i)`, so the negatives do not depend
//!   on the thread count. K above the candidates of any source is an error naming them.
//! * **Negative pairs** (GAE's AUC/AP and ogbl-collab's pool): per set, E pairs (a, b),
//!   a < b, drawn uniformly (both ends uniform, redrawn when a = b, when {a, b} is an edge
//!   of the input, or when the pair was drawn already for the set), draw t from
//!   `hash3(seed, LINK_PAIRS, set·2⁴⁸ + t)`, stored ascending.
//!
//! * **A time split** (`by_time`, on a store with edge times): the edges are visited
//!   latest first instead, ties (equal times) in the seeded key order above, under the
//!   same never-isolate rule: the first ⌊test·M⌋ taken are the test edges, the next
//!   ⌊val·M⌋ the validation edges, so every test edge is at least as late as every
//!   validation edge. An edge skipped by the rule stays in the graph although it is later
//!   than some held-out edge: those are counted (`TimeSplit::kept`, reported). Orientation
//!   and negatives are drawn as for a random split.
//!
//! The output keeps the input's edge times for the edges it keeps (`full.time`, the same
//! entry order as its CSR). Memory: the edge keys (24 bytes per undirected edge) and the
//! output graph (4 bytes per entry, 12 with times) are held in RAM, like `partition`; the
//! input is read through its mapping.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;

use crate::seed::{below_hash, hash3, mix64, stream};
use crate::store::format::{
    Dtype, Header, LinkMeta, LinkSectionId, SectionEntry, SectionId, TimeSplit,
};
use crate::store::link::LinkSet;
use crate::store::mmap::{Csr, GraphStore};
use crate::store::time::write_times;
use crate::store::writer::{SectionWriter, StoreWriter};
use crate::store::StoreError;

/// What to hold out and how many negatives to draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitEdgesSpec {
    /// Fraction of the input's undirected edges held out for validation, in [0, 1).
    pub val: f64,
    /// Fraction held out for testing, in [0, 1); `val + test < 1`.
    pub test: f64,
    /// Tail negatives per positive K ≥ 1 (1000: ogbl-citation2's).
    pub negatives: u64,
    /// Seed of the split and of every negative.
    pub seed: u64,
    /// Hold out edges even when a node is left with none.
    pub allow_isolated: bool,
    /// A time split: the latest edges go to test, the next latest to validation (the
    /// input must have edge times).
    pub by_time: bool,
}

impl Default for SplitEdgesSpec {
    fn default() -> Self {
        SplitEdgesSpec {
            val: 0.05,
            test: 0.1,
            negatives: 1000,
            seed: 0,
            allow_isolated: false,
            by_time: false,
        }
    }
}

/// What `split_edges` did.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitReport {
    /// The input's undirected edges M.
    pub input_edges: u64,
    /// Validation positives.
    pub n_val: u64,
    /// Test positives.
    pub n_test: u64,
    /// Tail negatives per positive.
    pub negatives: u64,
    /// A time split's record (kept edges, the sets' time ranges); `None` for a random one.
    pub by_time: Option<TimeSplit>,
    /// Wall time, seconds.
    pub seconds: f64,
}

fn arg(what: String) -> StoreError {
    StoreError::argument(what)
}

/// Checks the fractions and K, and turns the fractions into counts of `m` edges.
pub fn split_counts(spec: &SplitEdgesSpec, m: u64) -> Result<(u64, u64), StoreError> {
    for (flag, x) in [("--val", spec.val), ("--test", spec.test)] {
        if !(0.0..1.0).contains(&x) {
            return Err(arg(format!("{flag} {x}: expected a fraction in [0, 1)")));
        }
    }
    if spec.val + spec.test >= 1.0 {
        return Err(arg(format!(
            "--val {} + --test {} = {}: expected a sum below 1 (some edges must stay for message passing)",
            spec.val,
            spec.test,
            spec.val + spec.test
        )));
    }
    if spec.negatives == 0 {
        return Err(arg("--negatives 0: expected at least 1".into()));
    }
    let (n_val, n_test) = (
        (spec.val * m as f64).floor() as u64,
        (spec.test * m as f64).floor() as u64,
    );
    if n_val + n_test == 0 {
        return Err(arg(format!(
            "--val {} and --test {} of {m} undirected edges hold out no edge (each count is ⌊fraction × edges⌋)",
            spec.val, spec.test
        )));
    }
    Ok((n_val, n_test))
}

/// Writes the store at `out`: `input`'s nodes, features, labels and roles, its full graph
/// minus the held-out edges as both graphs, and the link sections. `input` is never
/// modified; the output goes through the store writer (temporary directory, fsync,
/// `verify`, rename). See the module comment for every draw.
///
/// `verify` is the whole-store check the writer runs before the rename (callers pass
/// [`crate::store::check()`], which checks the link sections with the rest): passed in, since
/// the check reads the link split through this module.
pub fn split_edges(
    input: &GraphStore,
    out: &Path,
    spec: &SplitEdgesSpec,
    force: bool,
    verify: impl FnOnce(&GraphStore) -> Result<(), StoreError>,
) -> Result<SplitReport, StoreError> {
    let t0 = Instant::now();
    if input.is_typed() {
        return Err(StoreError::input(
            input.path(),
            "a typed store (node and edge types, issue 57): split-edges would hold edges out of the full graph but not out of its relations; not supported yet",
        ));
    }
    let full = input.full();
    let m = full.n_entries() as u64 / 2;
    if m == 0 {
        return Err(StoreError::input(
            input.path(),
            "the store has no edges: there is nothing to hold out",
        ));
    }
    let (n_val, n_test) = split_counts(spec, m)?;
    if spec.by_time && input.edge_times().is_none() {
        return Err(StoreError::input(
            input.path(),
            "--by-time: the store has no edge times (no full.time section); import the graph with them (`import edgelist --time-column C`, `import ogb-link` of a dataset with raw/edge_year.csv.gz) or split at random (without --by-time)",
        ));
    }
    let chosen = choose_edges(input, full, spec, n_val + n_test)?;
    let held = &chosen.taken;
    // Random: validation first. By time: test first (the latest), then validation.
    let (val, test, val_t, test_t) = if spec.by_time {
        let (t, v) = held.split_at(n_test as usize);
        let (tt, vt) = chosen.times.split_at(n_test as usize);
        (v, t, vt, tt)
    } else {
        let (v, t) = held.split_at(n_val as usize);
        let (vt, tt) = chosen.times.split_at(n_val as usize);
        (v, t, vt, tt)
    };
    let by_time = spec.by_time.then(|| TimeSplit {
        kept: chosen.kept,
        val_time: span(val_t),
        test_time: span(test_t),
    });
    let val = sorted(val);
    let test = sorted(test);
    let mut out_keys: HashSet<u64> = HashSet::with_capacity(held.len());
    out_keys.extend(held.iter().map(|&(u, v)| super::key(u, v)));
    let val_neg = tail_negatives(full, &val, LinkSet::Val, spec)?;
    let test_neg = tail_negatives(full, &test, LinkSet::Test, spec)?;
    let val_pairs = negative_pairs(full, val.len(), LinkSet::Val, spec.seed)?;
    let test_pairs = negative_pairs(full, test.len(), LinkSet::Test, spec.seed)?;

    let (offsets, indices, times) = residual_graph(full, input.edge_times(), &out_keys)?;
    let w = StoreWriter::create(out, force)?;
    let graph = [
        write_u64(&w, SectionId::FullOffsets, &offsets)?,
        write_u32(w.section(SectionId::FullIndices, Dtype::U32)?, &indices)?,
        write_u64(&w, SectionId::TrainOffsets, &offsets)?,
        write_u32(w.section(SectionId::TrainIndices, Dtype::U32)?, &indices)?,
    ];
    let h = input.header();
    let mut sections: Vec<SectionEntry> = graph.into();
    for id in [SectionId::Features, SectionId::Labels, SectionId::Roles] {
        let mut s = w.section(id, h.section(id).dtype)?;
        for chunk in input.section_bytes(id).chunks(1 << 24) {
            s.write_bytes(chunk)?;
        }
        sections.push(s.finish()?);
    }
    let flat = |v: &[(u32, u32)]| v.iter().flat_map(|&(a, b)| [a, b]).collect::<Vec<u32>>();
    let mut link_sections = Vec::with_capacity(6);
    for (id, data) in [
        (LinkSectionId::ValPos, flat(&val)),
        (LinkSectionId::ValNeg, val_neg),
        (LinkSectionId::ValNegPairs, flat(&val_pairs)),
        (LinkSectionId::TestPos, flat(&test)),
        (LinkSectionId::TestNeg, test_neg),
        (LinkSectionId::TestNegPairs, flat(&test_pairs)),
    ] {
        link_sections.push(write_u32(w.link_section(id)?, &data)?);
    }
    let edge_time = match &times {
        Some(t) => Some(write_times(
            &w,
            t,
            h.edge_time.as_ref().and_then(|m| m.unit.clone()),
        )?),
        None => None,
    };
    let header = Header {
        n_nodes: h.n_nodes,
        n_entries: indices.len() as u64,
        n_train_entries: indices.len() as u64,
        n_features: h.n_features,
        n_classes: h.n_classes,
        label_kind: h.label_kind,
        train_graph: crate::store::TrainGraph::Given,
        split: h.split,
        sections,
        source: format!(
            "saintflow split-edges --val {} --test {} --negatives {} --seed {}{}{} of: {}",
            spec.val,
            spec.test,
            spec.negatives,
            spec.seed,
            if spec.allow_isolated {
                " --allow-isolated"
            } else {
                ""
            },
            if spec.by_time { " --by-time" } else { "" },
            h.source
        ),
        link: Some(LinkMeta {
            n_val,
            n_test,
            negatives: spec.negatives,
            val_negpairs: None,
            test_negpairs: None,
            given: false,
            seed: spec.seed,
            allow_isolated: spec.allow_isolated,
            input_edges: m,
            by_time,
            sections: link_sections,
        }),
        edge_time,
        types: None,
    };
    w.commit(&header, verify)?;
    Ok(SplitReport {
        input_edges: m,
        n_val,
        n_test,
        negatives: spec.negatives,
        by_time,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

fn write_u64(w: &StoreWriter, id: SectionId, v: &[u64]) -> Result<SectionEntry, StoreError> {
    let mut s = w.section(id, Dtype::U64)?;
    s.write_u64s(v)?;
    s.finish()
}

fn write_u32(mut s: SectionWriter, v: &[u32]) -> Result<SectionEntry, StoreError> {
    s.write_u32s(v)?;
    s.finish()
}

fn sorted(v: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

/// The earliest and latest of `times`, `None` when empty.
fn span(times: &[i64]) -> Option<[i64; 2]> {
    let lo = times.iter().min()?;
    Some([*lo, *times.iter().max()?])
}

/// What [`choose_edges`] took.
struct Chosen {
    /// The held-out edges in the order taken, oriented.
    taken: Vec<(u32, u32)>,
    /// Their times (0 on a store without times).
    times: Vec<i64>,
    /// Edges visited before the last one taken but skipped by the never-isolate rule.
    kept: u64,
}

/// The held-out edges in the order taken, oriented; see the module comment.
fn choose_edges(
    input: &GraphStore,
    full: Csr<'_>,
    spec: &SplitEdgesSpec,
    need: u64,
) -> Result<Chosen, StoreError> {
    let n = full.n_nodes();
    let times = input.edge_times();
    // (Reverse(time), key, u, v): sorted ascending, the latest edges come first, equal
    // times in key order; a random split sorts by key alone (every time 0).
    let mut edges: Vec<(Reverse<i64>, u64, u32, u32)> = (0..n as u32)
        .into_par_iter()
        .map(|u| -> Result<Vec<_>, StoreError> {
            let row = full.checked_neighbors(u)?;
            // Strictly increasing and loop-free rows (what `check` verifies; a store over
            // 1 GiB may come here unchecked): the draws below rely on them.
            if let Some(w) = row.windows(2).find(|w| w[0] >= w[1]) {
                return Err(StoreError::row_not_sorted(u, w[1]));
            }
            if row.binary_search(&u).is_ok() {
                return Err(StoreError::corrupt(
                    input.section_path(SectionId::FullIndices),
                    SectionId::FullIndices.name(),
                    format!("node {u} has a self loop (run `saintflow check`)"),
                ));
            }
            let base = full.offsets()[u as usize] as usize;
            Ok(row
                .iter()
                .enumerate()
                .filter(|&(_, &v)| u < v)
                .map(|(j, &v)| {
                    let k = (u64::from(u) << 32) | u64::from(v);
                    let t = match times {
                        Some(t) if spec.by_time => t.get(base + j).copied().unwrap_or(0),
                        _ => 0,
                    };
                    (Reverse(t), hash3(spec.seed, stream::LINK_SPLIT, k), u, v)
                })
                .collect())
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    edges.par_sort_unstable();
    let mut deg: Vec<u32> = (0..n as u32).map(|u| full.degree(u) as u32).collect();
    let mut taken = Vec::with_capacity(need as usize);
    let mut taken_times = Vec::with_capacity(need as usize);
    let mut kept = 0u64;
    for &(Reverse(t), h, u, v) in &edges {
        if taken.len() as u64 == need {
            break;
        }
        let (du, dv) = (deg[u as usize], deg[v as usize]);
        if spec.allow_isolated || (du > 1 && dv > 1) {
            deg[u as usize] = du.saturating_sub(1);
            deg[v as usize] = dv.saturating_sub(1);
            taken.push(if mix64(h) >> 63 == 1 { (v, u) } else { (u, v) });
            taken_times.push(t);
        } else {
            kept += 1;
        }
    }
    if (taken.len() as u64) < need {
        return Err(StoreError::input(
            input.path(),
            format!(
                "cannot hold out {need} of {} undirected edges: only {} can be held out (in the {} order) without leaving a node with no edge; lower --val/--test or pass --allow-isolated",
                edges.len(),
                taken.len(),
                if spec.by_time { "latest-first" } else { "seeded" }
            ),
        ));
    }
    Ok(Chosen {
        taken,
        times: taken_times,
        kept,
    })
}

/// A graph's offsets, indices and (when the input has them) its entries' times.
type Residual = (Vec<u64>, Vec<u32>, Option<Vec<i64>>);

/// The input's full graph without the edges in `held` (unordered keys), with the times of
/// the entries it keeps when the input has times.
fn residual_graph(
    full: Csr<'_>,
    times: Option<&[i64]>,
    held: &HashSet<u64>,
) -> Result<Residual, StoreError> {
    let mut offsets = Vec::with_capacity(full.n_nodes() + 1);
    offsets.push(0u64);
    let mut indices = Vec::with_capacity(full.n_entries().saturating_sub(2 * held.len()));
    let mut kept_times = times.map(|_| Vec::with_capacity(indices.capacity()));
    for u in 0..full.n_nodes() as u32 {
        let row = full.checked_neighbors(u)?;
        let base = full.offsets()[u as usize] as usize;
        for (j, &v) in row.iter().enumerate() {
            if held.contains(&super::key(u, v)) {
                continue;
            }
            indices.push(v);
            if let (Some(out), Some(t)) = (&mut kept_times, times) {
                out.push(t.get(base + j).copied().unwrap_or(0));
            }
        }
        offsets.push(indices.len() as u64);
    }
    Ok((offsets, indices, kept_times))
}

/// The K tail negatives of every positive, flat (E × K), each row ascending.
fn tail_negatives(
    full: Csr<'_>,
    pos: &[(u32, u32)],
    set: LinkSet,
    spec: &SplitEdgesSpec,
) -> Result<Vec<u32>, StoreError> {
    let n = full.n_nodes() as u64;
    let k = spec.negatives;
    let rows: Vec<Vec<u32>> = pos
        .par_iter()
        .enumerate()
        .map(|(i, &(u, _))| {
            let nbrs = full.checked_neighbors(u)?;
            // The excluded ids, ascending: u's neighbours and u itself.
            let at = nbrs.partition_point(|&w| w < u);
            let mut excluded = Vec::with_capacity(nbrs.len() + 1);
            excluded.extend_from_slice(&nbrs[..at]);
            excluded.push(u);
            excluded.extend_from_slice(&nbrs[at..]);
            let candidates = n.saturating_sub(excluded.len() as u64);
            if k > candidates {
                return Err(arg(format!(
                    "--negatives {k}: positive ({u}, …) of the {} set has only {candidates} candidate negatives (N = {n} nodes − 1 − degree {}); expected K ≤ {candidates}",
                    set.name(),
                    nbrs.len()
                )));
            }
            let row_seed = hash3(spec.seed, stream::LINK_NEGATIVES, ((set as u64) << 48) | i as u64);
            let ranks = floyd(candidates, k, row_seed);
            let mut row: Vec<u32> = ranks.into_iter().map(|c| nth_free(&excluded, c)).collect();
            row.sort_unstable();
            Ok(row)
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(rows.concat())
}

/// The `c`-th id (from 0) not in `excluded` (strictly ascending): c + #{j : excluded[j] −
/// j ≤ c}, by binary search (excluded[j] − j never decreases).
fn nth_free(excluded: &[u32], c: u64) -> u32 {
    let (mut lo, mut hi) = (0usize, excluded.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if u64::from(excluded[mid]).saturating_sub(mid as u64) <= c {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (c + lo as u64) as u32
}

/// Floyd's algorithm: `k` distinct ranks uniform in `0..n` (k ≤ n), from counter-based
/// draws of `seed`.
fn floyd(n: u64, k: u64, seed: u64) -> Vec<u64> {
    let mut chosen: HashSet<u64> = HashSet::with_capacity(k as usize);
    let mut out = Vec::with_capacity(k as usize);
    for (t, j) in (n - k..n).enumerate() {
        let r = below_hash(hash3(seed, 0, t as u64), j + 1);
        let pick = if chosen.contains(&r) { j } else { r };
        chosen.insert(pick);
        out.push(pick);
    }
    out
}

/// `count` distinct non-edges (a, b), a < b, of `full`, ascending; see the module comment.
fn negative_pairs(
    full: Csr<'_>,
    count: usize,
    set: LinkSet,
    seed: u64,
) -> Result<Vec<(u32, u32)>, StoreError> {
    let n = full.n_nodes() as u64;
    let non_edges =
        (n.saturating_mul(n.saturating_sub(1)) / 2).saturating_sub(full.n_entries() as u64 / 2);
    if count as u64 > non_edges {
        return Err(arg(format!(
            "the {} set needs {count} negative pairs, the graph has only {non_edges} non-edges",
            set.name()
        )));
    }
    let mut seen = HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    let max_draws = 1000 * count as u64 + (1 << 20);
    let mut t = 0u64;
    while out.len() < count {
        if t == max_draws {
            return Err(arg(format!(
                "the {} set: {max_draws} draws gave {} of {count} distinct negative pairs (a graph this dense needs fewer positives)",
                set.name(),
                out.len()
            )));
        }
        let h = hash3(seed, stream::LINK_PAIRS, ((set as u64) << 48) | t);
        t += 1;
        let (a, b) = (below_hash(h, n) as u32, below_hash(mix64(h), n) as u32);
        let (a, b) = (a.min(b), a.max(b));
        if a == b || full.neighbors(a).binary_search(&b).is_ok() || !seen.insert(super::key(a, b)) {
            continue;
        }
        out.push((a, b));
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_free_skips_the_excluded_ids() {
        let excluded = [1, 2, 5];
        let free: Vec<u32> = (0..5).map(|c| nth_free(&excluded, c)).collect();
        assert_eq!(free, [0, 3, 4, 6, 7]);
        assert_eq!(nth_free(&[], 4), 4);
        assert_eq!(nth_free(&[0, 1, 2], 0), 3);
    }

    #[test]
    fn floyd_draws_distinct_ranks_in_range_and_is_uniform() {
        let mut counts = [0u64; 10];
        for s in 0..20_000u64 {
            let r = floyd(10, 3, s);
            let mut d = r.clone();
            d.sort_unstable();
            d.dedup();
            assert_eq!(d.len(), 3, "{r:?}");
            for x in r {
                counts[x as usize] += 1;
            }
        }
        // 60,000 draws over 10 ranks: 6,000 each, σ ≈ 71.
        for c in counts {
            assert!((5_600..6_400).contains(&c), "{counts:?}");
        }
        assert_eq!(floyd(5, 5, 1).len(), 5);
    }

    #[test]
    fn counts_are_floors_and_bad_fractions_are_refused() {
        let spec = |val, test, negatives| SplitEdgesSpec {
            val,
            test,
            negatives,
            ..SplitEdgesSpec::default()
        };
        assert_eq!(
            split_counts(&spec(0.05, 0.1, 10), 5278).unwrap(),
            (263, 527)
        );
        for (v, t, k, needle) in [
            (1.0, 0.0, 1, "--val 1"),
            (-0.1, 0.0, 1, "--val -0.1"),
            (0.0, f64::NAN, 1, "--test NaN"),
            (0.6, 0.4, 1, "sum below 1"),
            (0.1, 0.1, 0, "--negatives 0"),
            (0.0, 0.0, 1, "hold out no edge"),
        ] {
            let e = split_counts(&spec(v, t, k), 100).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}
