//! The one pass of `saintflow check` over a store's large sections (issue 56).
//!
//! Before, the check read the full graph's indices seven times (a checksum, then one scan
//! per kind of problem, two for symmetry) and the features twice: about 140 GB read for a
//! 37.5 GB store at Kronecker scale 27, where the page cache under an 8 GiB cap holds none
//! of it between passes. Here the rows are walked once, in order, in chunks of
//! [`CHUNK_ROWS`]: for each chunk, the bytes of the full graph's and the training graph's
//! indices and of the features that belong to its rows are fed to their sections'
//! streaming checksums while the chunk's rows are scanned in parallel blocks for every
//! per-entry and per-row problem at once (an index out of range, a row not strictly
//! increasing, a self loop, the symmetry hash sums, the training graph's rows against the
//! full graph's by a merge of the two sorted rows, non-finite features). Each chunk's bytes
//! are read from disk once and used while in the page cache.
//!
//! What it finds is what the separate scans found (same counts, same first entries in row
//! order: tests/store_damage.rs damages stores and checks the messages); the slow binary
//! searches that list asymmetric entries still run, and only when the hash sums disagree.

use std::ops::Range;

use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use crate::progress::Progress;
use crate::store::format::{Role, SectionId, TrainGraph};
use crate::store::mmap::{Csr, GraphStore};
use crate::store::scan::{blocks, entry_hashes, merge, Found};

/// Rows per chunk: the unit whose bytes are hashed and scanned together (at degree 24 and
/// F = 32, about 50 MB of a chunk's sections).
pub const CHUNK_ROWS: usize = 1 << 18;

/// The sections the pass hashes, in this order: every section but `open`'s
/// [`SMALL_SECTIONS`](crate::store::mmap::SMALL_SECTIONS) (a test holds the two to
/// [`SectionId::ALL`]).
pub const HASHED: [SectionId; 3] = [
    SectionId::FullIndices,
    SectionId::TrainIndices,
    SectionId::Features,
];

/// Everything one pass finds. Per graph, index 0 is the full graph and 1 the training
/// graph.
#[derive(Debug, Default, Clone)]
pub struct PassFound {
    /// xxh3-64 of each [`HASHED`] section.
    pub checksums: [u64; 3],
    /// Entries whose index is ≥ N.
    pub out_of_range: [Found; 2],
    /// Rows not strictly increasing (`v` = 0).
    pub unsorted: [Found; 2],
    /// Entries (u, u).
    pub loops: [Found; 2],
    /// Wrapping sums of [`entry_hashes`] over the entries (0, 1) and over the reversed
    /// entries (2, 3): equal pairs for a symmetric graph.
    pub sums: [[u64; 4]; 2],
    /// Training-graph entries absent from the full graph.
    pub extra: Found,
    /// Induced training graph only: its entries touching a non-training node.
    pub outside: Found,
    /// Induced training graph only: full-graph entries between training nodes it lacks.
    pub missing: Found,
    /// Feature rows with a NaN or an infinity (`v` = 0).
    pub non_finite: Found,
}

impl PassFound {
    /// Whether graph `g`'s hash sums say it is symmetric.
    pub fn symmetric(&self, g: usize) -> bool {
        let s = self.sums[g];
        s[0] == s[2] && s[1] == s[3]
    }

    fn then(mut self, mut b: PassFound) -> PassFound {
        let join = |a: &mut Found, b: &mut Found| *a = merge(std::mem::take(a), std::mem::take(b));
        for g in 0..2 {
            join(&mut self.out_of_range[g], &mut b.out_of_range[g]);
            join(&mut self.unsorted[g], &mut b.unsorted[g]);
            join(&mut self.loops[g], &mut b.loops[g]);
            for k in 0..4 {
                self.sums[g][k] = self.sums[g][k].wrapping_add(b.sums[g][k]);
            }
        }
        join(&mut self.extra, &mut b.extra);
        join(&mut self.outside, &mut b.outside);
        join(&mut self.missing, &mut b.missing);
        join(&mut self.non_finite, &mut b.non_finite);
        self
    }
}

/// What the scan of rows reads: the two graphs, the roles, the features.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The full graph (0) and the training graph (1).
    pub graphs: [Csr<'a>; 2],
    /// One role byte per node.
    pub roles: &'a [u8],
    /// Row-major features, `f` per node.
    pub features: &'a [f32],
    /// F.
    pub f: usize,
    /// Whether the training graph is the induced one.
    pub induced: bool,
}

impl<'a> View<'a> {
    /// The sections of `store`.
    pub fn of(store: &'a GraphStore) -> Self {
        View {
            graphs: [store.full(), store.train()],
            roles: store.roles(),
            features: store.features(),
            f: store.n_features(),
            induced: store.header().train_graph == TrainGraph::Induced,
        }
    }

    fn is_train(&self, v: u32) -> bool {
        Role::from_byte(self.roles[v as usize]) == Some(Role::Train)
    }
}

/// Reads every large section of `store` once (see the module's header).
pub fn run(store: &GraphStore, progress: &Progress) -> PassFound {
    let view = View::of(store);
    let n = store.n_nodes();
    let bytes = HASHED.map(|id| store.section_bytes(id));
    let mut hashers = HASHED.map(|_| Xxh3::new());
    let ticker = progress.ticker(n as u64, "check", "rows");
    let mut found = PassFound::default();
    let mut r0 = 0;
    while r0 < n {
        let r1 = (r0 + CHUNK_ROWS).min(n);
        // Byte ranges of the chunk's rows in each hashed section: indices by the offsets
        // (monotone and ending at nnz: `open` checked them), features by the row width.
        let [full, train] = view.graphs;
        let ranges: [Range<usize>; 3] = [
            full.offsets()[r0] as usize * 4..full.offsets()[r1] as usize * 4,
            train.offsets()[r0] as usize * 4..train.offsets()[r1] as usize * 4,
            r0 * view.f * 4..r1 * view.f * 4,
        ];
        let (_, chunk) = rayon::join(
            || {
                hashers
                    .par_iter_mut()
                    .zip(ranges)
                    .enumerate()
                    .for_each(|(i, (h, r))| h.update(&bytes[i][r]))
            },
            || scan(view, r0..r1),
        );
        found = found.then(chunk);
        ticker.inc((r1 - r0) as u64);
        r0 = r1;
    }
    ticker.finish();
    found.checksums = hashers.map(|h| h.digest());
    found
}

/// Every per-entry and per-row check of rows `rows`, in parallel blocks (no checksums).
pub fn scan(view: View<'_>, rows: Range<usize>) -> PassFound {
    blocks(rows.len())
        .into_par_iter()
        .map(|b| scan_rows(view, rows.start + b.start..rows.start + b.end))
        .reduce(PassFound::default, PassFound::then)
}

fn scan_rows(view: View<'_>, rows: Range<usize>) -> PassFound {
    let graphs = view.graphs;
    let n = graphs[0].n_nodes() as u64;
    let f = view.f;
    let mut out = PassFound::default();
    for u in rows {
        let u = u as u32;
        // Per graph: the row strictly increasing, and every index in it below N.
        let mut sorted = [true; 2];
        let mut in_range = [true; 2];
        for (g, csr) in graphs.iter().enumerate() {
            let row = csr.neighbors(u);
            let mut sums = out.sums[g];
            for (i, &v) in row.iter().enumerate() {
                if u64::from(v) >= n {
                    out.out_of_range[g].note(u, v);
                    in_range[g] = false;
                }
                if v == u {
                    out.loops[g].note(u, v);
                }
                if i > 0 && row[i - 1] >= v {
                    sorted[g] = false;
                }
                let [a, b] = entry_hashes(u, v);
                let [c, d] = entry_hashes(v, u);
                sums[0] = sums[0].wrapping_add(a);
                sums[1] = sums[1].wrapping_add(b);
                sums[2] = sums[2].wrapping_add(c);
                sums[3] = sums[3].wrapping_add(d);
            }
            out.sums[g] = sums;
            if !sorted[g] {
                out.unsorted[g].note(u, 0);
            }
        }
        // The training row against the full row: a merge of two sorted rows whose ids
        // index the roles (what it finds is unused when either graph's structure is
        // broken anywhere).
        if sorted == [true, true] && in_range == [true, true] {
            compare_rows(
                u,
                graphs[0].neighbors(u),
                graphs[1].neighbors(u),
                view.induced,
                &|v| view.is_train(v),
                &mut out,
            );
        }
        if f > 0 {
            let row = &view.features[u as usize * f..(u as usize + 1) * f];
            if row.iter().any(|x| !x.is_finite()) {
                out.non_finite.note(u, 0);
            }
        }
    }
    out
}

/// Row `u` of the training graph (`train`) against row `u` of the full graph (`full`),
/// both sorted: training entries the full row lacks, and for an induced training graph
/// its entries touching a non-training node and the full entries between training nodes
/// it lacks. Each kind is noted in row order, as the separate scans did.
fn compare_rows(
    u: u32,
    full: &[u32],
    train: &[u32],
    induced: bool,
    is_train: &impl Fn(u32) -> bool,
    out: &mut PassFound,
) {
    let tu = induced && is_train(u);
    let missing = |v: u32, out: &mut PassFound| {
        if tu && is_train(v) {
            out.missing.note(u, v);
        }
    };
    let mut i = 0;
    for &v in train {
        while i < full.len() && full[i] < v {
            missing(full[i], out);
            i += 1;
        }
        if i < full.len() && full[i] == v {
            i += 1;
        } else {
            out.extra.note(u, v);
        }
        if induced && !(tu && is_train(v)) {
            out.outside.note(u, v);
        }
    }
    for &v in &full[i..] {
        missing(v, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mmap::csr_arrays;
    use crate::store::scan::{
        asymmetric_entries, contains, entries_not_in, find_entries, find_rows,
    };
    use rand::{Rng, SeedableRng};

    /// A symmetric random graph on `n` nodes, then `damage` random changes: an index out
    /// of range, a swap of two entries of a row, a duplicate, a self loop, an entry
    /// dropped.
    fn graph(rng: &mut rand_xoshiro::Xoshiro256PlusPlus, n: u32, damage: usize) -> Vec<Vec<u32>> {
        let mut rows = vec![Vec::new(); n as usize];
        for _ in 0..n * 3 {
            let (u, v) = (rng.random_range(0..n), rng.random_range(0..n));
            if u != v {
                rows[u as usize].push(v);
                rows[v as usize].push(u);
            }
        }
        for r in &mut rows {
            r.sort_unstable();
            r.dedup();
        }
        for _ in 0..damage {
            let u = rng.random_range(0..n) as usize;
            let len = rows[u].len();
            match rng.random_range(0..5) {
                0 if len > 0 => rows[u][rng.random_range(0..len)] = n + rng.random_range(0..9),
                1 if len > 1 => rows[u].swap(0, len - 1),
                2 if len > 0 => {
                    let last = rows[u][len - 1];
                    rows[u].push(last);
                }
                3 => rows[u].push(u as u32),
                4 if len > 0 => {
                    rows[u].remove(rng.random_range(0..len));
                }
                _ => {}
            }
        }
        rows
    }

    #[test]
    fn the_pass_and_open_checksum_every_section_once() {
        use crate::store::mmap::SMALL_SECTIONS;
        for id in SectionId::ALL {
            let (small, hashed) = (SMALL_SECTIONS.contains(&id), HASHED.contains(&id));
            assert!(small != hashed, "{id:?}: small {small}, hashed {hashed}");
        }
    }

    #[test]
    fn one_pass_finds_what_the_separate_scans_find() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(56);
        for case in 0..300 {
            let n = rng.random_range(1..60u32);
            let roles: Vec<u8> = (0..n).map(|_| rng.random_range(0..4u8)).collect();
            let is_train = |v: u32| roles[v as usize] == 1;
            let full_rows = graph(&mut rng, n, if case % 3 == 0 { 0 } else { case % 4 });
            // The training graph: the induced one, sometimes damaged (an edge to a
            // non-training node, one missing, one absent from the full graph).
            let mut train_rows: Vec<Vec<u32>> = full_rows
                .iter()
                .enumerate()
                .map(|(u, r)| {
                    r.iter()
                        .copied()
                        .filter(|&v| v < n && is_train(u as u32) && is_train(v))
                        .collect()
                })
                .collect();
            if case % 5 == 1 {
                let u = rng.random_range(0..n) as usize;
                train_rows[u].push(rng.random_range(0..n));
                train_rows[u].sort_unstable();
                train_rows[u].dedup();
            }
            if case % 7 == 2 {
                let u = rng.random_range(0..n) as usize;
                train_rows[u].clear();
            }
            let f = case % 3;
            let mut features: Vec<f32> = (0..n as usize * f).map(|i| i as f32).collect();
            if f > 0 && case % 2 == 0 {
                let i = rng.random_range(0..features.len());
                features[i] = if case % 4 == 0 {
                    f32::NAN
                } else {
                    f32::INFINITY
                };
            }
            let (fo, fi) = csr_arrays(&full_rows);
            let (to, ti) = csr_arrays(&train_rows);
            let full = Csr::new(&fo, &fi).unwrap();
            let train = Csr::new(&to, &ti).unwrap();
            let view = View {
                graphs: [full, train],
                roles: &roles,
                features: &features,
                f,
                induced: case % 6 != 5,
            };
            // Blocks of one row and of all rows alike.
            let pass = scan(view, 0..n as usize);
            let by_one = (0..n as usize)
                .map(|u| scan(view, u..u + 1))
                .fold(PassFound::default(), PassFound::then);
            let mut ok = [true; 2];
            for (g, csr) in [full, train].into_iter().enumerate() {
                let range = find_entries(csr, |_, v| v >= n);
                let unsorted = find_rows(n as usize, |u| {
                    csr.neighbors(u).windows(2).any(|w| w[0] >= w[1])
                });
                assert_eq!(pass.out_of_range[g], range, "case {case} graph {g}");
                assert_eq!(pass.unsorted[g], unsorted, "case {case} graph {g}");
                assert_eq!(pass.loops[g], find_entries(csr, |u, v| u == v));
                assert_eq!(by_one.sums[g], pass.sums[g]);
                assert_eq!(by_one.out_of_range[g], range);
                ok[g] = range.count == 0 && unsorted.count == 0;
                if ok[g] {
                    assert_eq!(
                        pass.symmetric(g),
                        asymmetric_entries(csr).count == 0,
                        "case {case} graph {g}"
                    );
                }
            }
            if ok == [true, true] {
                assert_eq!(pass.extra, entries_not_in(train, full), "case {case}");
                if view.induced {
                    let outside = find_entries(train, |u, v| !(is_train(u) && is_train(v)));
                    let missing = find_entries(full, |u, v| {
                        is_train(u) && is_train(v) && !contains(train, u, v)
                    });
                    assert_eq!(pass.outside, outside, "case {case}");
                    assert_eq!(pass.missing, missing, "case {case}");
                } else {
                    assert_eq!(pass.outside.count + pass.missing.count, 0);
                }
                assert_eq!(by_one.extra, pass.extra);
            }
            let bad = find_rows(n as usize, |u| {
                features[u as usize * f..(u as usize + 1) * f]
                    .iter()
                    .any(|x| !x.is_finite())
            });
            assert_eq!(pass.non_finite, bad, "case {case}");
        }
    }
}
