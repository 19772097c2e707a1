//! Building CSR sections from a stream of directed entries by external bucketing.
//!
//! Entries `(src, dst)` are packed into a u64 key `src << 32 | dst` and appended to one of
//! B bucket files by `src >> shift`, so each bucket holds a contiguous range of rows. On
//! [`CsrBuilder::finish`] each bucket is read back alone, sorted, deduplicated and stripped
//! of self loops, and its rows are appended to the output sections. Peak memory is one
//! bucket's keys (`mem_bytes`, default 512 MiB) and, while that bucket is finished, about
//! 8 more bytes per entry and 20 per row of the bucket (its columns, indices and row
//! bounds: ≈ 1.1 GiB at a full default bucket; measured 1.2 GiB of anonymous memory for
//! an OGB import of 67 M entries, BENCHMARKS.md), plus the bucket files' write buffers,
//! whatever the number of entries — provided source ids are spread evenly over the id
//! range (the generator permutes ids; importers of skewed files may see one large bucket).

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::store::writer::SectionWriter;
use crate::store::StoreError;

/// Default memory for one bucket: 512 MiB of keys.
pub const DEFAULT_BUCKET_BYTES: u64 = 512 << 20;
/// Write buffer per bucket file.
const BUCKET_BUF_BYTES: usize = 1 << 20;
/// Most bucket files open at once.
const MAX_BUCKETS: u64 = 1024;

/// Counts from a build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Entries pushed.
    pub pushed: u64,
    /// Self loops dropped.
    pub self_loops: u64,
    /// Duplicate entries dropped.
    pub duplicates: u64,
    /// Entries written to the first (unfiltered) output.
    pub entries: u64,
}

struct Bucket {
    data: BucketData,
    len: u64,
}

/// Where a bucket's keys are kept: in memory while the whole graph fits one bucket's
/// budget (no disk round trip for small graphs), else in a file.
enum BucketData {
    Memory(Vec<u64>),
    File { path: PathBuf, out: BufWriter<File> },
}

fn bucket_file(path: PathBuf) -> Result<BucketData, StoreError> {
    let f = File::create(&path).map_err(|e| StoreError::io(&path, "create", e))?;
    Ok(BucketData::File {
        path,
        out: BufWriter::with_capacity(BUCKET_BUF_BYTES, f),
    })
}

/// Which bucket a row falls in: rows are split into ranges of 2^shift.
#[derive(Debug, Clone, Copy)]
pub struct BucketMap {
    shift: u32,
}

impl BucketMap {
    /// The bucket of row `src`.
    #[inline]
    pub fn bucket_of(self, src: u32) -> usize {
        (u64::from(src) >> self.shift) as usize
    }
}

/// A set of node ids as a bitmap: N/8 bytes, O(1) membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSet {
    words: Vec<u64>,
}

impl NodeSet {
    /// The set `{v < n : member(v)}`, built in parallel.
    pub fn from_fn(n: u64, member: impl Fn(u32) -> bool + Sync) -> Self {
        use rayon::prelude::*;
        let words = (0..n.div_ceil(64))
            .into_par_iter()
            .map(|w| {
                let lo = w * 64;
                (lo..(lo + 64).min(n)).fold(0u64, |acc, v| {
                    acc | (u64::from(member(v as u32)) << (v - lo))
                })
            })
            .collect();
        NodeSet { words }
    }

    /// Whether `v` is in the set (false past its end).
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.words
            .get(v as usize / 64)
            .is_some_and(|w| w >> (v % 64) & 1 == 1)
    }
}

/// Accumulates directed entries on disk, then writes sorted, deduplicated CSR sections.
pub struct CsrBuilder {
    n_nodes: u64,
    shift: u32,
    buckets: Vec<Bucket>,
    pushed: u64,
    bucket_bytes: u64,
    /// File a memory bucket spills to if it outgrows `bucket_bytes`.
    spill_path: PathBuf,
}

/// One CSR to emit: its two sections and which entries it keeps.
pub struct CsrSink<'a> {
    /// Receives N+1 u64 offsets.
    pub offsets: &'a mut SectionWriter,
    /// Receives the u32 column indices.
    pub indices: &'a mut SectionWriter,
    /// `None` keeps every entry; `Some(set)` keeps the entries whose two ends are in `set`
    /// (an induced subgraph).
    pub keep: Option<&'a NodeSet>,
    /// `None` writes a row for every node (N+1 offsets); `Some(lo..hi)` writes rows
    /// `lo..hi` only (hi − lo + 1 offsets): a typed store's relation, whose rows are its
    /// source type's nodes (issue 57). Entries of rows outside are dropped; a relation's
    /// builder receives none.
    pub rows: Option<std::ops::Range<u64>>,
    /// Entries written (filled by `finish`).
    pub entries: u64,
}

impl CsrBuilder {
    /// A builder for `n_nodes` rows expecting about `expected_entries` entries, keeping
    /// one bucket under `bucket_bytes` of memory, with bucket files in `scratch`.
    pub fn new(
        scratch: &Path,
        n_nodes: u64,
        expected_entries: u64,
        bucket_bytes: u64,
    ) -> Result<Self, StoreError> {
        let node_bits = 64 - n_nodes.saturating_sub(1).leading_zeros();
        let per_bucket = (bucket_bytes / 8).max(1);
        let want = expected_entries.div_ceil(per_bucket).clamp(1, MAX_BUCKETS);
        let bucket_bits = (64 - (want - 1).leading_zeros()).min(node_bits);
        let shift = node_bits - bucket_bits;
        let n_buckets = n_nodes.div_ceil(1u64 << shift).max(1);
        // Several builders may share one scratch directory (full and training graphs).
        static BUILDERS: AtomicUsize = AtomicUsize::new(0);
        let id = BUILDERS.fetch_add(1, Ordering::Relaxed);
        let mut buckets = Vec::with_capacity(n_buckets as usize);
        for b in 0..n_buckets {
            let path = scratch.join(format!("csr{id}-bucket{b:05}.keys"));
            let data = if n_buckets == 1 {
                BucketData::Memory(Vec::new())
            } else {
                bucket_file(path)?
            };
            buckets.push(Bucket { data, len: 0 });
        }
        Ok(CsrBuilder {
            n_nodes,
            shift,
            buckets,
            pushed: 0,
            bucket_bytes,
            spill_path: scratch.join(format!("csr{id}-bucket00000.keys")),
        })
    }

    /// Number of rows N.
    pub fn n_nodes(&self) -> u64 {
        self.n_nodes
    }

    /// Number of bucket files.
    pub fn n_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The bucket that row `src` falls in.
    pub fn bucket_of(&self, src: u32) -> usize {
        self.bucket_map().bucket_of(src)
    }

    /// The row → bucket map, a copyable value for use from other threads.
    pub fn bucket_map(&self) -> BucketMap {
        BucketMap { shift: self.shift }
    }

    /// Appends keys (`src << 32 | dst`) that all fall in bucket `b`.
    /// The caller guarantees `src, dst < N` (checked in debug builds).
    pub fn push_bucket(&mut self, b: usize, keys: &[u64]) -> Result<(), StoreError> {
        debug_assert!(keys
            .iter()
            .all(|&k| self.bucket_of((k >> 32) as u32) == b && (k as u32 as u64) < self.n_nodes));
        let bucket = &mut self.buckets[b];
        if let BucketData::Memory(mem) = &mut bucket.data {
            if (mem.len() + keys.len()) as u64 * 8 > self.bucket_bytes {
                // More entries than expected: move to disk and keep memory bounded.
                let mut data = bucket_file(self.spill_path.clone())?;
                if let BucketData::File { path, out } = &mut data {
                    out.write_all(bytemuck::cast_slice(mem))
                        .map_err(|e| StoreError::io(&*path, "write", e))?;
                }
                bucket.data = data;
            }
        }
        match &mut bucket.data {
            BucketData::Memory(mem) => mem.extend_from_slice(keys),
            BucketData::File { path, out } => out
                .write_all(bytemuck::cast_slice(keys))
                .map_err(|e| StoreError::io(&*path, "write", e))?,
        }
        bucket.len += keys.len() as u64;
        self.pushed += keys.len() as u64;
        Ok(())
    }

    /// Appends one entry; `src` and `dst` must be `< N`.
    pub fn push(&mut self, src: u32, dst: u32) -> Result<(), StoreError> {
        if u64::from(src.max(dst)) >= self.n_nodes {
            return Err(StoreError::argument(format!(
                "entry ({src}, {dst}) out of range, expected ids < {}",
                self.n_nodes
            )));
        }
        let b = self.bucket_of(src);
        self.push_bucket(b, &[pack(src, dst)])
    }

    /// Turns each bucket into CSR rows and writes them to every sink; `on_bucket` is called
    /// after each bucket (progress). Self loops and duplicates are dropped from every sink.
    ///
    /// Per bucket: a counting sort by source row (two passes over the keys) places every
    /// destination in its row, then the rows are sorted and deduplicated in parallel. This
    /// is O(keys + Σ d log d) instead of a comparison sort of all keys.
    pub fn finish(
        self,
        sinks: &mut [CsrSink<'_>],
        mut on_bucket: impl FnMut(),
    ) -> Result<BuildStats, StoreError> {
        let mut stats = BuildStats {
            pushed: self.pushed,
            ..BuildStats::default()
        };
        let mut keys_buf: Vec<u64> = Vec::new();
        let mut cols: Vec<u32> = Vec::new();
        let mut start: Vec<usize> = Vec::new();
        let mut lens: Vec<u32> = Vec::new();
        let mut offsets_buf: Vec<u64> = Vec::new();
        let mut indices_buf: Vec<u32> = Vec::new();
        for (b, bucket) in self.buckets.into_iter().enumerate() {
            let keys: &[u64] = match bucket.data {
                BucketData::Memory(k) => {
                    keys_buf = k;
                    &keys_buf
                }
                BucketData::File { path, out } => {
                    let file = out
                        .into_inner()
                        .map_err(|e| StoreError::io(&path, "write", e.into_error()))?;
                    drop(file);
                    read_keys(&path, bucket.len, &mut keys_buf)?;
                    fs::remove_file(&path).map_err(|e| StoreError::io(&path, "remove", e))?;
                    &keys_buf
                }
            };
            let lo = (b as u64) << self.shift;
            let hi = ((b as u64 + 1) << self.shift).min(self.n_nodes);
            let rows = (hi - lo) as usize;

            // Counting sort by source row.
            counting_sort(keys, lo, rows, &mut start, &mut cols);
            // Sort, deduplicate and drop the self loop of every row, in parallel blocks.
            lens.clear();
            lens.resize(rows, 0);
            let (dups, loops) = sort_rows(&mut cols, &start, &mut lens, lo);
            stats.duplicates += dups;
            stats.self_loops += loops;

            for sink in sinks.iter_mut() {
                offsets_buf.clear();
                indices_buf.clear();
                let base = sink.entries;
                for r in 0..rows {
                    if let Some(range) = &sink.rows {
                        if !range.contains(&(lo + r as u64)) {
                            continue;
                        }
                    }
                    offsets_buf.push(base + indices_buf.len() as u64);
                    let row = &cols[start[r]..start[r] + lens[r] as usize];
                    match sink.keep {
                        None => indices_buf.extend_from_slice(row),
                        Some(set) if set.contains((lo + r as u64) as u32) => {
                            indices_buf.extend(row.iter().copied().filter(|&v| set.contains(v)))
                        }
                        Some(_) => {}
                    }
                }
                sink.entries = base + indices_buf.len() as u64;
                sink.offsets.write_u64s(&offsets_buf)?;
                sink.indices.write_u32s(&indices_buf)?;
            }
            on_bucket();
        }
        for sink in sinks.iter_mut() {
            sink.offsets.write_u64s(&[sink.entries])?;
        }
        stats.entries = sinks.first().map_or(0, |s| s.entries);
        Ok(stats)
    }
}

/// Places the destination of every key in its row: afterwards row `r` (source `lo + r`)
/// is `cols[start[r]..start[r+1]]`, in key order. Parallel by ranges of rows: each task
/// scans all keys (a cheap sequential read) and counts, then scatters, only its own rows,
/// so tasks write disjoint slices and the result does not depend on the thread count.
fn counting_sort(keys: &[u64], lo: u64, rows: usize, start: &mut Vec<usize>, cols: &mut Vec<u32>) {
    use rayon::prelude::*;
    let parts = rayon::current_num_threads().clamp(1, rows.max(1));
    let bounds: Vec<usize> = (0..=parts).map(|p| p * rows / parts).collect();
    let counts: Vec<Vec<usize>> = (0..parts)
        .into_par_iter()
        .map(|p| {
            let (r0, r1) = (bounds[p], bounds[p + 1]);
            let mut c = vec![0usize; r1 - r0];
            for &k in keys {
                let r = ((k >> 32) - lo) as usize;
                if (r0..r1).contains(&r) {
                    c[r - r0] += 1;
                }
            }
            c
        })
        .collect();
    start.clear();
    start.push(0);
    for c in &counts {
        for &x in c {
            start.push(start[start.len() - 1] + x);
        }
    }
    cols.clear();
    cols.resize(keys.len(), 0);
    let mut slices = Vec::with_capacity(parts);
    let mut rest = cols.as_mut_slice();
    for p in 0..parts {
        let (mine, tail) =
            std::mem::take(&mut rest).split_at_mut(start[bounds[p + 1]] - start[bounds[p]]);
        slices.push((p, mine));
        rest = tail;
    }
    let start = &*start;
    slices.into_par_iter().for_each(|(p, out)| {
        let (r0, r1) = (bounds[p], bounds[p + 1]);
        let base = start[r0];
        let mut pos: Vec<usize> = start[r0..r1].iter().map(|&s| s - base).collect();
        for &k in keys {
            let r = ((k >> 32) - lo) as usize;
            if (r0..r1).contains(&r) {
                out[pos[r - r0]] = k as u32;
                pos[r - r0] += 1;
            }
        }
    });
}

/// Rows per parallel task in [`sort_rows`].
const SORT_BLOCK_ROWS: usize = 4096;

/// Sorts each row `cols[start[r]..start[r+1]]` in place, removes duplicates and the self
/// loop (`lo + r`), and stores the remaining length in `lens[r]` (the kept entries are the
/// row's prefix). Returns (duplicates, self loops) removed.
fn sort_rows(cols: &mut [u32], start: &[usize], lens: &mut [u32], lo: u64) -> (u64, u64) {
    use rayon::prelude::*;
    let rows = lens.len();
    // Split `cols` and `lens` into disjoint blocks of rows so tasks own their slices.
    let mut tasks = Vec::with_capacity(rows.div_ceil(SORT_BLOCK_ROWS));
    let (mut rest_cols, mut rest_lens) = (cols, lens);
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + SORT_BLOCK_ROWS).min(rows);
        let (c, rc) = std::mem::take(&mut rest_cols).split_at_mut(start[r1] - start[r0]);
        let (l, rl) = std::mem::take(&mut rest_lens).split_at_mut(r1 - r0);
        tasks.push((r0, c, l));
        (rest_cols, rest_lens) = (rc, rl);
        r0 = r1;
    }
    tasks
        .into_par_iter()
        .map(|(r0, block, lens)| {
            let (mut dups, mut loops) = (0u64, 0u64);
            let base = start[r0];
            for (i, len) in lens.iter_mut().enumerate() {
                let r = r0 + i;
                let row = &mut block[start[r] - base..start[r + 1] - base];
                row.sort_unstable();
                let mut kept = 0;
                for j in 0..row.len() {
                    if j > 0 && row[j] == row[j - 1] {
                        dups += 1;
                        continue;
                    }
                    if u64::from(row[j]) == lo + r as u64 {
                        loops += 1;
                        continue;
                    }
                    row[kept] = row[j];
                    kept += 1;
                }
                *len = kept as u32;
            }
            (dups, loops)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// Packs a directed entry into a sortable key.
#[inline]
pub fn pack(src: u32, dst: u32) -> u64 {
    (u64::from(src) << 32) | u64::from(dst)
}

/// Reads a bucket file into `keys` (reusing its allocation across buckets).
fn read_keys(path: &Path, len: u64, keys: &mut Vec<u64>) -> Result<(), StoreError> {
    keys.clear();
    keys.resize(len as usize, 0);
    let mut f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    f.read_exact(bytemuck::cast_slice_mut(keys))
        .map_err(|e| StoreError::io(path, "read", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::format::SectionId;
    use crate::store::writer::StoreWriter;
    use proptest::prelude::*;

    /// The oracle: an in-memory sort of all keys.
    fn naive_csr(
        n: usize,
        entries: &[(u32, u32)],
        keep: impl Fn(u32, u32) -> bool,
    ) -> (Vec<u64>, Vec<u32>) {
        let mut e: Vec<(u32, u32)> = entries
            .iter()
            .copied()
            .filter(|&(u, v)| u != v && keep(u, v))
            .collect();
        e.sort_unstable();
        e.dedup();
        let mut offsets = vec![0u64; n + 1];
        for &(u, _) in &e {
            offsets[u as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        (offsets, e.iter().map(|&(_, v)| v).collect())
    }

    fn read<T: bytemuck::Pod>(path: &Path) -> Vec<T> {
        bytemuck::pod_collect_to_vec(&fs::read(path).unwrap())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn external_build_equals_in_memory_sort(
            n in 1usize..300,
            raw in prop::collection::vec((0u32..300, 0u32..300), 0..2000),
            bucket_bytes in prop::sample::select(vec![8u64, 64, 1024, 1 << 20]),
        ) {
            let entries: Vec<(u32, u32)> = raw.into_iter().map(|(u, v)| (u % n as u32, v % n as u32)).collect();
            let tmp = tempfile::tempdir().unwrap();
            let w = StoreWriter::create(&tmp.path().join("s"), false).unwrap();
            let mut b = CsrBuilder::new(&w.scratch_dir().unwrap(), n as u64, entries.len() as u64, bucket_bytes).unwrap();
            for &(u, v) in &entries {
                b.push(u, v).unwrap();
            }
            let mut o1 = w.section(SectionId::FullOffsets, crate::store::format::Dtype::U64).unwrap();
            let mut i1 = w.section(SectionId::FullIndices, crate::store::format::Dtype::U32).unwrap();
            let mut o2 = w.section(SectionId::TrainOffsets, crate::store::format::Dtype::U64).unwrap();
            let mut i2 = w.section(SectionId::TrainIndices, crate::store::format::Dtype::U32).unwrap();
            let all = |_: u32, _: u32| true;
            let set = NodeSet::from_fn(n as u64, |v| v % 3 != 0);
            let induced = |u: u32, v: u32| !u.is_multiple_of(3) && !v.is_multiple_of(3);
            let mut sinks = [
                CsrSink { offsets: &mut o1, indices: &mut i1, keep: None, rows: None, entries: 0 },
                CsrSink { offsets: &mut o2, indices: &mut i2, keep: Some(&set), rows: None, entries: 0 },
            ];
            let stats = b.finish(&mut sinks, || {}).unwrap();
            let (e1, e2) = (sinks[0].entries, sinks[1].entries);
            for s in [o1, i1, o2, i2] {
                s.finish().unwrap();
            }
            let dir = tmp.path().join(format!(".s.tmp-{}", std::process::id()));
            let (want_o, want_i) = naive_csr(n, &entries, all);
            prop_assert_eq!(read::<u64>(&dir.join(SectionId::FullOffsets.file_name())), want_o);
            prop_assert_eq!(read::<u32>(&dir.join(SectionId::FullIndices.file_name())), want_i.clone());
            prop_assert_eq!(e1, want_i.len() as u64);
            let (want_o, want_i) = naive_csr(n, &entries, induced);
            prop_assert_eq!(read::<u64>(&dir.join(SectionId::TrainOffsets.file_name())), want_o);
            prop_assert_eq!(read::<u32>(&dir.join(SectionId::TrainIndices.file_name())), want_i.clone());
            prop_assert_eq!(e2, want_i.len() as u64);
            let loops = entries.iter().filter(|(u, v)| u == v).count() as u64;
            prop_assert_eq!(stats.self_loops + stats.duplicates + stats.entries, entries.len() as u64);
            prop_assert!(stats.self_loops <= loops);
        }
    }
}
