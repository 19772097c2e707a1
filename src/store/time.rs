//! Edge times (issue 52: a time split needs them): the optional `full.time` section, one
//! i64 per entry of the full graph's CSR, aligned with `full.indices` (docs/FORMAT.md,
//! "Edge times").
//!
//! Invariants: the section has `n_entries` elements; the two entries of an undirected
//! edge carry the same time; the header's `min` and `max` are the section's. An importer
//! that meets an edge more than once (both directions listed, duplicate lines, ogbl-collab's
//! one line per year of collaboration) keeps the **earliest** time: the edge exists from
//! then on, which is what a time split asks ("was this edge there before the cut?").
//!
//! Importers do not know an entry's position until the CSR is built, so they spool
//! `(u, v, t)` records to a scratch file while they push edges ([`TimeSpool`], 16 bytes per
//! line on disk), and once the CSR sections are written [`TimeSpool::write`] maps the
//! section file, sets every entry to the minimum of its records (both directions of each),
//! and hashes it. Memory: the row offsets (8 bytes per node) and the mapped files, never
//! an array in proportion to the edges.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};
use xxhash_rust::xxh3::xxh3_64;

use crate::store::build::GraphSections;
use crate::store::format::{Dtype, SectionEntry, SectionId, TimeMeta, TIME_SECTION};
use crate::store::mmap::{Csr, GraphStore};
use crate::store::scan::{contains, find_entries};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// An entry no record reached yet (replaced by the minimum of its records; every entry has
/// a record, see [`TimeSpool::write`]).
const UNSET: i64 = i64::MAX;
/// Bytes of one spooled record: u32 source, u32 destination, i64 time.
const RECORD_BYTES: usize = 16;

/// The `(u, v, t)` records of an import, spooled to a scratch file until the CSR exists.
pub struct TimeSpool {
    path: PathBuf,
    out: BufWriter<File>,
    records: u64,
}

impl TimeSpool {
    /// A spool in the store writer's scratch directory.
    pub fn create(w: &StoreWriter) -> Result<Self, StoreError> {
        let path = w.scratch_dir()?.join("edge-times.spool");
        let f = File::create(&path).map_err(|e| StoreError::io(&path, "create", e))?;
        Ok(TimeSpool {
            path,
            out: BufWriter::with_capacity(1 << 20, f),
            records: 0,
        })
    }

    /// Records that edge {u, v} exists at time `t` (either direction; a self loop, which
    /// the store drops, is ignored).
    pub fn push(&mut self, u: u32, v: u32, t: i64) -> Result<(), StoreError> {
        if u == v {
            return Ok(());
        }
        let mut rec = [0u8; RECORD_BYTES];
        rec[..4].copy_from_slice(&u.to_le_bytes());
        rec[4..8].copy_from_slice(&v.to_le_bytes());
        rec[8..].copy_from_slice(&t.to_le_bytes());
        self.records += 1;
        self.out
            .write_all(&rec)
            .map_err(|e| StoreError::io(&self.path, "write", e))
    }

    /// Writes the `full.time` section of the store being written by `w`, whose CSR
    /// sections `graph` are finished: each entry the earliest time of the records of its
    /// edge (in either direction). `source` names the input in errors. The caller pushes
    /// a record for every edge it pushes into the CSR builder, in the same pass, so every
    /// entry is reached.
    pub fn write(
        self,
        w: &StoreWriter,
        graph: &GraphSections,
        unit: Option<&str>,
        source: &Path,
    ) -> Result<TimeMeta, StoreError> {
        let TimeSpool { path, out, records } = self;
        let f = out
            .into_inner()
            .map_err(|e| StoreError::io(&path, "write", e.into_error()))?;
        drop(f);
        let offsets_path = w.file_path(SectionId::FullOffsets.file_name());
        let indices_path = w.file_path(SectionId::FullIndices.file_name());
        let offsets: Vec<u64> = bytemuck::pod_collect_to_vec(
            &std::fs::read(&offsets_path).map_err(|e| StoreError::io(&offsets_path, "read", e))?,
        );
        let indices_map = map_read(&indices_path)?;
        let indices: &[u32] = match &indices_map {
            Some(m) => bytemuck::cast_slice(m),
            None => &[],
        };
        let csr = Csr::new(&offsets, indices)
            .map_err(|what| StoreError::corrupt(&offsets_path, "full.offsets", what))?;
        let nnz = graph.n_entries;
        debug_assert_eq!(nnz as usize, indices.len());

        let (name, file) = TIME_SECTION;
        let tpath = w.file_path(file);
        let tfile = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tpath)
            .map_err(|e| StoreError::io(&tpath, "create", e))?;
        let bytes = nnz * Dtype::I64.size();
        tfile
            .set_len(bytes)
            .map_err(|e| StoreError::io(&tpath, "resize", e))?;
        let mut map = if bytes == 0 {
            None
        } else {
            // SAFETY: a file of the writer's own temporary directory (locked, not yet
            // published), sized above; nothing else maps or truncates it while it lives.
            Some(
                unsafe { MmapMut::map_mut(&tfile) }
                    .map_err(|e| StoreError::io(&tpath, "mmap", e))?,
            )
        };
        let times: &mut [i64] = match &mut map {
            Some(m) => bytemuck::cast_slice_mut(&mut m[..]),
            None => &mut [],
        };
        times.fill(UNSET);
        let pos = |u: u32, v: u32| -> Option<usize> {
            if u as usize >= csr.n_nodes() {
                return None;
            }
            let at = csr.neighbors(u).binary_search(&v).ok()?;
            Some(offsets[u as usize] as usize + at)
        };
        let mut rd = BufReader::with_capacity(
            1 << 20,
            File::open(&path).map_err(|e| StoreError::io(&path, "open", e))?,
        );
        let mut rec = [0u8; RECORD_BYTES];
        for i in 0..records {
            rd.read_exact(&mut rec)
                .map_err(|e| StoreError::io(&path, "read", e))?;
            let u = u32::from_le_bytes(rec[..4].try_into().unwrap());
            let v = u32::from_le_bytes(rec[4..8].try_into().unwrap());
            let t = i64::from_le_bytes(rec[8..].try_into().unwrap());
            // Both directions: an edge's two entries take the earliest of all its records.
            // A missing reverse is an asymmetric list, which the import refuses at commit.
            let Some(p) = pos(u, v) else {
                return Err(StoreError::input(
                    source,
                    format!("edge record {i} ({u}, {v}) is not in the graph built from the same records (an importer bug: the records and the graph are pushed together)"),
                ));
            };
            times[p] = times[p].min(t);
            if let Some(q) = pos(v, u) {
                times[q] = times[q].min(t);
            }
        }
        // Every entry was reached: the records are the very edges pushed into the CSR
        // builder in the same pass (each record sets both of its entries), so no entry keeps
        // UNSET unless its time is i64::MAX, a valid time.
        let (min, max) = if times.is_empty() {
            (0, 0)
        } else {
            times
                .iter()
                .fold((i64::MAX, i64::MIN), |(a, b), &t| (a.min(t), b.max(t)))
        };
        let xxh3 = format!("{:016x}", xxh3_64(map.as_deref().unwrap_or(&[])));
        if let Some(m) = &map {
            m.flush().map_err(|e| StoreError::io(&tpath, "flush", e))?;
        }
        drop(map);
        tfile
            .sync_all()
            .map_err(|e| StoreError::io(&tpath, "fsync", e))?;
        std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, "remove", e))?;
        Ok(TimeMeta {
            unit: unit.map(str::to_string),
            min,
            max,
            section: SectionEntry {
                name: name.to_string(),
                file: file.to_string(),
                dtype: Dtype::I64,
                len: nnz,
                bytes,
                xxh3,
            },
        })
    }
}

fn map_read(path: &Path) -> Result<Option<Mmap>, StoreError> {
    let f = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
    let len = f
        .metadata()
        .map_err(|e| StoreError::io(path, "stat", e))?
        .len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: a finished section of the writer's own locked temporary directory, read only.
    let m = unsafe { Mmap::map(&f) }.map_err(|e| StoreError::io(path, "mmap", e))?;
    Ok(Some(m))
}

/// Writes `times` (one per entry of the full graph being written, in its order) as the
/// `full.time` section of `w`'s store; `unit` as the header records it.
pub fn write_times(
    w: &StoreWriter,
    times: &[i64],
    unit: Option<String>,
) -> Result<TimeMeta, StoreError> {
    let mut s = w.time_section()?;
    s.write_i64s(times)?;
    let section = s.finish()?;
    let (min, max) = times
        .iter()
        .fold(None, |acc: Option<(i64, i64)>, &t| {
            Some(acc.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
        })
        .unwrap_or((0, 0));
    Ok(TimeMeta {
        unit,
        min,
        max,
        section,
    })
}

/// Problems with a store's edge times (what `open` leaves: the checksum, min and max,
/// both entries of an edge equal; a time split's `kept` against the stored times), each
/// `<file>: section full.time: <what>`; `graph_ok` says whether the full graph's rows are
/// in range and sorted (else the per-edge tests are skipped).
pub(crate) fn check_times(store: &GraphStore, graph_ok: bool) -> Vec<String> {
    let (Some(meta), Some(times)) = (&store.header().edge_time, store.edge_times()) else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    let mut report = |what: String| {
        problems.push(format!(
            "{}: section {}: {what}",
            store.time_section_path().display(),
            TIME_SECTION.0
        ))
    };
    let bytes: &[u8] = bytemuck::cast_slice(times);
    let got = format!("{:016x}", xxh3_64(bytes));
    if got != meta.section.xxh3 {
        report(format!(
            "checksum mismatch, expected {}, got {got}",
            meta.section.xxh3
        ));
    }
    let (min, max) = times
        .iter()
        .fold(None, |acc: Option<(i64, i64)>, &t| {
            Some(acc.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
        })
        .unwrap_or((0, 0));
    if (min, max) != (meta.min, meta.max) {
        report(format!(
            "times span [{min}, {max}], the header says [{}, {}]",
            meta.min, meta.max
        ));
    }
    if !graph_ok {
        return problems;
    }
    let full = store.full();
    let offsets = full.offsets();
    let time_of = |u: u32, v: u32| -> Option<i64> {
        let at = full.neighbors(u).binary_search(&v).ok()?;
        times.get(offsets[u as usize] as usize + at).copied()
    };
    let differ = find_entries(full, |u, v| {
        u < v && contains(full, v, u) && time_of(u, v) != time_of(v, u)
    });
    if differ.count > 0 {
        let first: Vec<String> = differ
            .first
            .iter()
            .map(|&(u, v)| {
                format!(
                    "({u}, {v}) at {} but ({v}, {u}) at {}",
                    time_of(u, v).unwrap_or_default(),
                    time_of(v, u).unwrap_or_default()
                )
            })
            .collect();
        report(format!(
            "{} edges whose two entries have different times, first: {}",
            differ.count,
            first.join("; ")
        ));
    }
    if let Some(ts) = store.header().link.as_ref().and_then(|l| l.by_time) {
        if let Some(lo) = ts.earliest() {
            let later = find_entries(full, |u, v| u < v && time_of(u, v).is_some_and(|t| t > lo));
            let from = find_entries(full, |u, v| u < v && time_of(u, v).is_some_and(|t| t >= lo));
            if later.count > ts.kept || from.count < ts.kept {
                report(format!(
                    "time split: the graph keeps {} edges later than the earliest held-out time {lo} and {} at it or later, but the split records {} kept by the never-isolate rule (expected later ≤ kept ≤ at or later)",
                    later.count, from.count, ts.kept
                ));
            }
        }
    }
    problems
}
