//! A streamed chunk's rows sorted by part (issue 56): [`Parted`], the entries of a chunk of
//! output rows grouped by the part of X that holds their neighbours, so that folding a part
//! reads that part's entries alone, front to back.
//!
//! A chunk used to hold its rows as the store has them (each row's neighbours, ascending)
//! with a cursor per row, and each part of X was cut by walking every row from its cursor:
//! a cache miss per row per part, for rows that mostly have no entry in the part (a
//! Kronecker row of 24 entries against 19 parts), and a third of a streamed pass's CPU at
//! Kronecker scale 25 (`perf`: the cut's two closures 30 %, the copy of the rows into the
//! chunk 7.5 %, their check 4 %). Here the rows are read from the store once, checked as
//! they are read, and written into per-part runs; a part's cut then decodes its own run
//! and numbers its rows, sequentially.
//!
//! A run holds one 32-bit word an entry: the column within the part in the low 24 bits, and
//! in the high 8 the row's distance from the row of the run's previous entry (from the
//! run's first row for its first entry); a distance of 255 or more is written as 255 with
//! the distance whole in the next word. The chunk's rows are split into jobs of rows, each
//! with its own run per part in a buffer of its own, so that both the sort and every cut
//! run in parallel, and a job's rows are read from the map once: counted, then written
//! while they are still in the cache.

use rayon::prelude::*;

use super::block::{Block, EntryValues};
use super::Result;
use crate::ir::SparseMat;
use crate::op::AdjKind;
use crate::store::{GraphStore, StoreError};

/// Bits of a word that hold the column within the part.
const COL_BITS: u32 = 24;
const COL_MASK: u32 = (1 << COL_BITS) - 1;
/// A row distance at or past this is written as it, the distance whole in the next word.
const ESCAPE: u32 = 255;
/// The most rows a part of X may have when a chunk is sorted by part.
pub(super) const MAX_PART_ROWS: usize = 1 << COL_BITS;

/// Rows a job sorts and cuts (about 1.5 MB of a Kronecker graph's ids at degree 24: they
/// stay in the core's cache between the count and the writes).
const JOB_ROWS: usize = 1 << 14;

/// The most (part, job) runs a chunk indexes: past it, jobs take more rows.
const MAX_RUNS: usize = 1 << 22;

/// The buffers a streamed level's chunk leaves to the next: its rows as the store has them
/// (read for a relation's adjacency) and sorted by part (for a plain flavour's).
#[derive(Default)]
pub(super) struct Spare {
    pub(super) block: Option<Block>,
    pub(super) parted: Option<Parted>,
}

/// The bytes a chunk's [`Parted`] holds per row, at `fanout` stored entries a row on
/// average (what the plan counts): a word an entry and an eighth more (the runs' room to
/// grow, taken once), the row's degree, and 4 bytes for the parts' index and the escaped
/// distances.
pub(super) fn row_bytes(fanout: usize) -> usize {
    (4 * fanout * 9).div_ceil(8) + 8
}

/// A chunk's rows c0..c1 of the full graph, their entries sorted by the part of X that
/// holds each neighbour (parts of `part_rows` consecutive rows).
pub(super) struct Parted {
    c0: usize,
    rows: usize,
    n: usize,
    part_rows: usize,
    parts: usize,
    job_rows: usize,
    jobs: usize,
    /// Each row's entries in the store.
    pub(super) degree: Vec<u32>,
    /// Where job j's run of part p starts in `runs[j]`: `starts[j * (parts + 1) + p]`, and
    /// where its last one ends.
    starts: Vec<usize>,
    runs: Vec<Vec<u32>>,
}

impl Parted {
    /// Rows c0..c1 of `store`'s full graph sorted by parts of `part_rows` rows (at most
    /// [`MAX_PART_ROWS`]), into `spare`'s buffers (an earlier chunk's). A neighbour id ≥ N
    /// or a row not in increasing order (a corrupt store read before `check`) is an error
    /// naming the entry, the first in row order.
    pub(super) fn new(
        store: &GraphStore,
        range: (usize, usize),
        part_rows: usize,
        spare: Option<Parted>,
    ) -> Result<Parted> {
        Parted::with_jobs(store, range, part_rows, JOB_ROWS, spare)
    }

    /// [`Parted::new`] with jobs of at least `job_rows` rows (the unit tests' few, so that
    /// small chunks are cut by several jobs).
    fn with_jobs(
        store: &GraphStore,
        (c0, c1): (usize, usize),
        part_rows: usize,
        job_rows: usize,
        spare: Option<Parted>,
    ) -> Result<Parted> {
        assert!(
            (1..=MAX_PART_ROWS).contains(&part_rows),
            "the plan bounds a part's rows"
        );
        let full = store.full();
        let (n, rows) = (full.n_nodes(), c1 - c0);
        let offsets = &full.offsets()[c0..=c1];
        // A part's cut counts the chunk's entries (and a self-loop per row) in u32.
        crate::sample::subgraph_offset((offsets[rows] - offsets[0]) as usize + rows)?;
        let parts = n.div_ceil(part_rows).max(1);
        let job_rows = job_rows.max((rows * parts).div_ceil(MAX_RUNS));
        let jobs = rows.div_ceil(job_rows).max(1);
        let (mut degree, mut starts, mut runs) =
            spare.map_or_else(Default::default, |p| (p.degree, p.starts, p.runs));
        degree.clear();
        degree.extend(offsets.windows(2).map(|w| (w[1] - w[0]) as u32));
        starts.clear();
        starts.resize(jobs * (parts + 1), 0);
        runs.resize_with(jobs, Vec::new);
        let parted = Parted {
            c0,
            rows,
            n,
            part_rows,
            parts,
            job_rows,
            jobs,
            degree,
            starts: Vec::new(),
            runs: Vec::new(),
        };
        // Each job's words counted per part, its rows checked, then written; the first
        // error in row order.
        let done: Vec<Result<()>> = runs
            .par_iter_mut()
            .zip(starts.par_chunks_mut(parts + 1))
            .enumerate()
            .map(|(j, (run, start))| {
                let count = &mut start[1..];
                parted.scan(store, j, |p, distance, _| {
                    count[p] += 1 + usize::from(distance >= ESCAPE as usize);
                })?;
                for p in 1..=parts {
                    start[p] += start[p - 1];
                }
                // A run grown to an eighth past the job's words, once: grown as a Vec
                // grows, a run doubled its capacity whenever a chunk's job had a word more
                // than the last one's, and the chunks' memory passed the plan's count (230
                // MiB more at Kronecker scale 25 under `memcap 2G`, killed at a larger
                // buffer).
                let words = start[parts];
                run.clear();
                if run.capacity() < words {
                    run.reserve_exact(words + words / 8);
                }
                run.resize(words, 0);
                let mut at = start[..parts].to_vec();
                parted.scan(store, j, |p, distance, col| {
                    let at = &mut at[p];
                    if distance >= ESCAPE as usize {
                        run[*at] = (ESCAPE << COL_BITS) | col;
                        run[*at + 1] = distance as u32;
                        *at += 2;
                    } else {
                        run[*at] = ((distance as u32) << COL_BITS) | col;
                        *at += 1;
                    }
                })
            })
            .collect();
        done.into_iter().collect::<Result<Vec<()>>>()?;
        Ok(Parted {
            starts,
            runs,
            ..parted
        })
    }

    /// Job j's rows read from the store in order, each entry handed to `put` as (its part,
    /// its row's distance from the row of the part's previous entry in the job — from the
    /// job's first row for the first —, its column within the part); an id ≥ N or a row
    /// not increasing is an error.
    fn scan(
        &self,
        store: &GraphStore,
        j: usize,
        mut put: impl FnMut(usize, usize, u32),
    ) -> Result<()> {
        let full = store.full();
        let (offsets, indices) = (full.offsets(), full.indices());
        let (r0, r1) = (j * self.job_rows, ((j + 1) * self.job_rows).min(self.rows));
        let mut last = vec![r0; self.parts];
        for i in r0..r1 {
            let v = self.c0 + i;
            let row = &indices[offsets[v] as usize..offsets[v + 1] as usize];
            let mut prev = None;
            for &w in row {
                if w as usize >= self.n {
                    let n = self.n as u64;
                    return Err(StoreError::neighbor_out_of_range(v as u32, w, n).into());
                }
                if prev.is_some_and(|p| w <= p) {
                    return Err(StoreError::row_not_sorted(v as u32, w).into());
                }
                prev = Some(w);
                let p = w as usize / self.part_rows;
                put(p, i - last[p], w - (p * self.part_rows) as u32);
                last[p] = i;
            }
        }
        Ok(())
    }

    /// The chunk's rows.
    #[cfg(test)]
    fn rows(&self) -> usize {
        self.rows
    }

    /// The first row of part p and the row past its last.
    pub(super) fn part_range(&self, p: usize) -> (usize, usize) {
        let p0 = p * self.part_rows;
        (p0, (p0 + self.part_rows).min(self.n))
    }

    /// Part p's entries as [`Block::adjacency`](super::block::Block::adjacency) has them in
    /// the plain flavour `kind` — the self-loop where the row's node sorts, values from the
    /// full graph's degrees (`degrees[w - p0]` for a neighbour w in the part, read by the
    /// per-entry norms only) — with columns numbered from the part's first row, into
    /// `spare`'s buffers. Each job counts its rows' entries, the offsets are summed, then
    /// each job fills its own.
    pub(super) fn part(
        &self,
        kind: AdjKind,
        p: usize,
        degrees: &[f32],
        spare: Option<SparseMat>,
    ) -> SparseMat {
        let (rows, job_rows) = (self.rows, self.job_rows);
        let (p0, p1) = self.part_range(p);
        let (mut offsets, mut indices, mut values) = SparseMat::buffers(spare, rows);
        let (ev, loops) = (EntryValues::of(kind), kind.self_loops());
        let (norm, per_entry) = (ev.norm, ev.per_entry());
        // The chunk's rows whose own node is in the part: each gets its self-loop here.
        let (l0, l1) = if loops {
            (p0.saturating_sub(self.c0), p1.saturating_sub(self.c0))
        } else {
            (0, 0)
        };
        offsets.resize(rows + 1, 0);
        offsets[1..]
            .par_chunks_mut(job_rows)
            .enumerate()
            .for_each(|(j, count)| {
                count.fill(0);
                let r0 = j * job_rows;
                for (i, _) in self.run(p, j) {
                    count[i - r0] += 1;
                }
                for i in l0.max(r0)..l1.min(r0 + count.len()) {
                    count[i - r0] += 1;
                }
            });
        let mut total = 0;
        for o in &mut offsets[1..] {
            total += *o;
            *o = total;
        }
        indices.resize(total as usize, 0);
        values.resize(total as usize, 0.0);
        let mut jobs = Vec::with_capacity(self.jobs);
        let (mut ind, mut val) = (&mut indices[..], &mut values[..]);
        for j in 0..self.jobs {
            let (r0, r1) = (j * job_rows, ((j + 1) * job_rows).min(rows));
            let len = (offsets[r1] - offsets[r0]) as usize;
            let (i, rest) = std::mem::take(&mut ind).split_at_mut(len);
            ind = rest;
            let (v, rest) = std::mem::take(&mut val).split_at_mut(len);
            val = rest;
            jobs.push((j, r0, r1, i, v));
        }
        jobs.into_par_iter().for_each(|(j, r0, r1, ind, val)| {
            let own = |i: usize| ((self.c0 + i) - p0) as u32;
            let dv = |i: usize| ev.degree(self.degree[i] as f32);
            let mut at = 0;
            let mut put = |at: &mut usize, col: u32, value: f32| {
                (ind[*at], val[*at]) = (col, value);
                *at += 1;
            };
            // The next row whose self-loop is still to be written.
            let (mut q, l1) = (l0.clamp(r0, r1), l1.clamp(r0, r1));
            for (i, col) in self.run(p, j) {
                // Rows before i are done: their loops go after their entries.
                while q < l1 && q < i {
                    put(&mut at, own(q), norm.value(dv(q), dv(q)));
                    q += 1;
                }
                let d = dv(i);
                if q == i && q < l1 && col >= own(i) {
                    put(&mut at, own(i), norm.value(d, d));
                    q += 1;
                }
                let value = if per_entry {
                    norm.value(d, ev.degree(degrees[col as usize]))
                } else {
                    norm.value(d, d)
                };
                put(&mut at, col, value);
            }
            while q < l1 {
                put(&mut at, own(q), norm.value(dv(q), dv(q)));
                q += 1;
            }
        });
        SparseMat::csr(offsets, indices, values, 1)
    }

    /// The (row, column within the part) entries of part p's run of job j, in order.
    fn run(&self, p: usize, j: usize) -> impl Iterator<Item = (usize, u32)> + '_ {
        let k = j * (self.parts + 1) + p;
        let run = &self.runs[j][self.starts[k]..self.starts[k + 1]];
        let (mut at, mut row) = (0, j * self.job_rows);
        std::iter::from_fn(move || {
            let w = *run.get(at)?;
            at += 1;
            let mut distance = w >> COL_BITS;
            if distance == ESCAPE {
                distance = run[at];
                at += 1;
            }
            row += distance as usize;
            Some((row, w & COL_MASK))
        })
    }

    /// The bytes the chunk holds (its buffers' capacities).
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        let runs: usize = self.runs.iter().map(Vec::capacity).sum();
        4 * (runs + self.degree.capacity()) + 8 * self.starts.capacity()
    }

    /// Words past one an entry: the escaped distances (the unit tests' check that the
    /// escape is exercised).
    #[cfg(test)]
    fn escapes(&self) -> usize {
        let words: usize = self.runs[..self.jobs].iter().map(Vec::len).sum();
        words - self.degree.iter().map(|&d| d as usize).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::block::Block;
    use crate::infer::levels::AdjKey;
    use crate::progress::Progress;
    use crate::store::gen::{generate_kronecker, KroneckerSpec};

    fn store(scale: u32, degree: f64, dir: &std::path::Path) -> GraphStore {
        let path = dir.join(format!("g{scale}.sf"));
        let spec = KroneckerSpec {
            scale,
            degree,
            n_features: 2,
            seed: 56,
            ..KroneckerSpec::default()
        };
        generate_kronecker(&spec, &path, true, &Progress::hidden()).unwrap();
        GraphStore::open(&path).unwrap()
    }

    /// Sorted by part and cut part by part, a chunk's rows in every plain flavour are the
    /// adjacency the in-memory blocks build ([`Block::adjacency`]), entry for entry and bit
    /// for bit: the self-loop in the part that holds the row's own node, where it sorts;
    /// the per-entry norms' values from the part's degrees. Parts of one row, of a few, and
    /// the whole graph; chunks at the start, the middle and the end; jobs of 16 rows and of
    /// thousands, on a sparse graph where a part's entries lie hundreds of rows apart
    /// (escaped distances).
    #[test]
    fn a_chunks_parts_in_every_plain_flavour_are_its_built_adjacency() {
        let tmp = tempfile::tempdir().unwrap();
        let (dense, sparse) = (store(8, 6.0, tmp.path()), store(11, 1.0, tmp.path()));
        let mut escaped = 0;
        for (store, parts) in [(&dense, &[1, 7, 64, 1 << 8][..]), (&sparse, &[1, 3][..])] {
            let n = store.n_nodes();
            let full = store.full();
            for (c0, c1) in [(0, n), (17, 90), (n - 5, n)] {
                let block = Block::new(store, c0, c1).unwrap();
                let mut spare = None;
                for (&part_rows, job_rows) in parts.iter().flat_map(|p| [(p, 16), (p, 4096)]) {
                    let range = (c0, c1);
                    let parted =
                        Parted::with_jobs(store, range, part_rows, job_rows, spare.take()).unwrap();
                    escaped += parted.escapes();
                    for kind in AdjKind::ALL {
                        let key = AdjKey {
                            kind,
                            relation: None,
                        };
                        let want = block.adjacency(store, key);
                        let ws = &want.structure;
                        let mut rows = vec![Vec::new(); parted.rows()];
                        let mut spare_mat = None;
                        for p in 0..n.div_ceil(part_rows) {
                            let (p0, p1) = parted.part_range(p);
                            let degrees: Vec<f32> =
                                (p0..p1).map(|v| full.degree(v as u32) as f32).collect();
                            let sub = parted.part(kind, p, &degrees, spare_mat.take());
                            let st = &sub.structure;
                            for (i, row) in rows.iter_mut().enumerate() {
                                for k in st.offsets[i] as usize..st.offsets[i + 1] as usize {
                                    let v = sub.values.data[k].to_bits();
                                    row.push((st.indices[k] + p0 as u32, v));
                                }
                            }
                            spare_mat = Some(sub);
                        }
                        for (i, row) in rows.iter().enumerate() {
                            let (lo, hi) = (ws.offsets[i] as usize, ws.offsets[i + 1] as usize);
                            let built: Vec<(u32, u32)> = (lo..hi)
                                .map(|k| (ws.indices[k], want.values.data[k].to_bits()))
                                .collect();
                            assert_eq!(
                                row, &built,
                                "{kind:?}, rows {c0}..{c1}, parts of {part_rows}, jobs of \
                                 {job_rows}: row {i}"
                            );
                        }
                    }
                    spare = Some(parted);
                }
            }
        }
        assert!(escaped > 0, "no distance of 255 rows or more was written");
    }

    /// What a chunk's sorted rows hold stays within what the plan counts for them
    /// ([`row_bytes`] at the graph's mean fanout, as `PassPlan` has it), chunk after chunk
    /// with the buffers passed on: a run grown as a Vec grows doubled its capacity when a
    /// chunk had a word more than the last.
    #[test]
    fn a_chunk_holds_no_more_than_the_plan_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let store = store(16, 8.0, tmp.path());
        let n = store.n_nodes();
        let fanout = 1 + store.full().n_entries() / n;
        // Chunks of two jobs of JOB_ROWS and one of three (the parts' index is small
        // beside the runs at this size, as in a pass).
        let mut spare = None;
        for (c0, c1) in [(0, n / 2), (n / 2, n), (n / 4, n)] {
            let parted = Parted::new(&store, (c0, c1), 1000, spare.take()).unwrap();
            let (held, counted) = (parted.held_bytes(), (c1 - c0) * row_bytes(fanout));
            assert!(
                held <= counted,
                "rows {c0}..{c1}: {held} bytes held, {counted} counted"
            );
            spare = Some(parted);
        }
    }

    /// A neighbour id past N or a row out of order in the store is the error a block's
    /// copy gives, naming the node and the entry.
    #[test]
    fn a_damaged_row_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let good = store(8, 6.0, tmp.path());
        let n = good.n_nodes();
        let (v, len) = (0..n)
            .map(|v| (v, good.full().degree(v as u32)))
            .find(|&(_, d)| d >= 2)
            .unwrap();
        let first = good.full().offsets()[v] as usize;
        drop(good);
        let path = tmp.path().join("g8.sf").join("full.indices.u32");
        let bytes = std::fs::read(&path).unwrap();
        let at = 4 * (first + len - 1);
        for (damage, want) in [(n as u32 + 7, "out of range"), (0, "not in increasing")] {
            let mut b = bytes.clone();
            b[at..at + 4].copy_from_slice(&damage.to_le_bytes());
            std::fs::write(&path, &b).unwrap();
            let store = GraphStore::open(tmp.path().join("g8.sf")).unwrap();
            let err = Parted::new(&store, (0, n), 7, None)
                .err()
                .unwrap()
                .to_string();
            assert!(
                err.contains(want) && err.contains(&format!("node {v}")),
                "{err}"
            );
        }
    }
}
