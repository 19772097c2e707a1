//! Building CSR sections from a stream of directed entries by external bucketing.
//!
//! Entries `(src, dst)` are packed into a u64 key `src << 32 | dst` and appended to one of
//! B bucket files by `src >> shift`, so each bucket holds a contiguous range of rows. On
//! [`CsrBuilder::finish`] each bucket is read back alone, sorted, deduplicated and stripped
//! of self loops, and its rows are appended to the output sections. Peak memory is one
//! bucket (`mem_bytes`, default 512 MiB) plus the bucket files' write buffers, whatever
//! the number of entries — provided source ids are spread evenly over the id range (the
//! generator permutes ids; importers of skewed files may see one large bucket).

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::slice::ParallelSliceMut;

use crate::error::StoreError;
use crate::store::writer::SectionWriter;

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
    path: PathBuf,
    out: BufWriter<File>,
    len: u64,
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

/// Accumulates directed entries on disk, then writes sorted, deduplicated CSR sections.
pub struct CsrBuilder {
    n_nodes: u64,
    shift: u32,
    buckets: Vec<Bucket>,
    pushed: u64,
}

/// One CSR to emit: its two sections and which entries it keeps.
pub struct CsrSink<'a> {
    /// Receives N+1 u64 offsets.
    pub offsets: &'a mut SectionWriter,
    /// Receives the u32 column indices.
    pub indices: &'a mut SectionWriter,
    /// Keeps entry `(src, dst)` when true.
    pub keep: &'a (dyn Fn(u32, u32) -> bool + Sync),
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
            let f = File::create(&path).map_err(|e| StoreError::io(&path, "create", e))?;
            buckets.push(Bucket {
                path,
                out: BufWriter::with_capacity(BUCKET_BUF_BYTES, f),
                len: 0,
            });
        }
        Ok(CsrBuilder {
            n_nodes,
            shift,
            buckets,
            pushed: 0,
        })
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
        bucket
            .out
            .write_all(bytemuck::cast_slice(keys))
            .map_err(|e| StoreError::io(&bucket.path, "write", e))?;
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

    /// Sorts each bucket and writes the rows to every sink; `on_bucket` is called after
    /// each bucket (progress). Self loops and duplicates are dropped from every sink.
    pub fn finish(
        self,
        sinks: &mut [CsrSink<'_>],
        mut on_bucket: impl FnMut(),
    ) -> Result<BuildStats, StoreError> {
        let mut stats = BuildStats {
            pushed: self.pushed,
            ..BuildStats::default()
        };
        let mut offsets_buf: Vec<u64> = Vec::new();
        let mut indices_buf: Vec<u32> = Vec::new();
        for (b, bucket) in self.buckets.into_iter().enumerate() {
            let Bucket { path, out, len } = bucket;
            let file = out
                .into_inner()
                .map_err(|e| StoreError::io(&path, "write", e.into_error()))?;
            drop(file);
            let mut keys = read_keys(&path, len)?;
            fs::remove_file(&path).map_err(|e| StoreError::io(&path, "remove", e))?;
            keys.par_sort_unstable();
            let before = keys.len() as u64;
            keys.dedup();
            stats.duplicates += before - keys.len() as u64;
            let loops_before = keys.len();
            keys.retain(|&k| (k >> 32) != (k & 0xffff_ffff));
            stats.self_loops += (loops_before - keys.len()) as u64;

            let lo = (b as u64) << self.shift;
            let hi = ((b as u64 + 1) << self.shift).min(self.n_nodes);
            for sink in sinks.iter_mut() {
                offsets_buf.clear();
                indices_buf.clear();
                let mut row = lo;
                let mut off = sink.entries;
                for &k in &keys {
                    let (u, v) = ((k >> 32) as u32, k as u32);
                    if !(sink.keep)(u, v) {
                        continue;
                    }
                    while row <= u64::from(u) {
                        offsets_buf.push(off);
                        row += 1;
                    }
                    indices_buf.push(v);
                    off += 1;
                }
                while row < hi {
                    offsets_buf.push(off);
                    row += 1;
                }
                sink.entries = off;
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

/// Packs a directed entry into a sortable key.
#[inline]
pub fn pack(src: u32, dst: u32) -> u64 {
    (u64::from(src) << 32) | u64::from(dst)
}

fn read_keys(path: &Path, len: u64) -> Result<Vec<u64>, StoreError> {
    let mut keys = vec![0u64; len as usize];
    let mut f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    f.read_exact(bytemuck::cast_slice_mut(&mut keys))
        .map_err(|e| StoreError::io(path, "read", e))?;
    Ok(keys)
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
            let even = |u: u32, v: u32| (u + v) % 2 == 0;
            let mut sinks = [
                CsrSink { offsets: &mut o1, indices: &mut i1, keep: &all, entries: 0 },
                CsrSink { offsets: &mut o2, indices: &mut i2, keep: &even, entries: 0 },
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
            let (want_o, want_i) = naive_csr(n, &entries, even);
            prop_assert_eq!(read::<u64>(&dir.join(SectionId::TrainOffsets.file_name())), want_o);
            prop_assert_eq!(read::<u32>(&dir.join(SectionId::TrainIndices.file_name())), want_i.clone());
            prop_assert_eq!(e2, want_i.len() as u64);
            let loops = entries.iter().filter(|(u, v)| u == v).count() as u64;
            prop_assert_eq!(stats.self_loops + stats.duplicates + stats.entries, entries.len() as u64);
            prop_assert!(stats.self_loops <= loops);
        }
    }
}
