//! Values kept between levels (issue 54: out of `train/blocked.rs`): an N-row matrix in
//! memory when every kept value fits
//! [`InferOptions::memory_bytes`](super::InferOptions::memory_bytes), otherwise in an
//! unlinked temporary file (its blocks reserved with `fallocate`, so a full disk is an
//! error before anything runs) written with positioned writes and read through a map; and
//! `gather_rows`, rows of such a matrix (or of the features) by node id.

use std::path::Path;

use rayon::prelude::*;

use super::{InferError, Result};
use crate::ir::Tensor;

/// An N-row matrix kept between levels: in memory, or in a temporary file written with
/// positioned writes (no page faults on fresh pages) and read through a map.
pub(super) enum Kept {
    Mem(Vec<f32>),
    File {
        file: std::fs::File,
        map: memmap2::Mmap,
    },
}

impl Kept {
    pub(super) fn new(rows: usize, cols: usize, file: Option<&Path>) -> Result<Kept> {
        let len = rows * cols;
        let Some(path) = file else {
            return Ok(Kept::Mem(vec![0.0; len]));
        };
        if len == 0 {
            return Ok(Kept::Mem(Vec::new()));
        }
        let io = |e: std::io::Error| InferError::io(path, "create scratch file", e);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        // Unlinked at once: the open file keeps it alive and a crash leaves nothing behind.
        let _ = std::fs::remove_file(path);
        crate::atomic::reserve(
            &f,
            path,
            (len * 4) as u64,
            "a value kept between layers (choose the scratch directory with --scratch-dir)",
        )?;
        // SAFETY: the file was created by this process under a fresh name and unlinked at
        // once; nothing else can open, write or resize it; its blocks are reserved, and
        // this process only writes it through `write_rows` between reads of other rows.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(io)?;
        Ok(Kept::File { file: f, map })
    }

    /// Asks the kernel to start reading elements `at..at + len` (a file's; MADV_WILLNEED),
    /// a part of X read next.
    pub(super) fn will_need(&self, at: usize, len: usize) {
        if let Kept::File { map, .. } = self {
            let (at, end) = (at * 4, ((at + len) * 4).min(map.len()));
            if end > at {
                // A hint: refused, it changes speed only.
                let _ = map.advise_range(memmap2::Advice::WillNeed, at, end - at);
            }
        }
    }

    /// Whether the value lives in a scratch file (read through a map), not in memory.
    pub(super) fn in_file(&self) -> bool {
        matches!(self, Kept::File { .. })
    }

    pub(super) fn data(&self) -> &[f32] {
        match self {
            Kept::Mem(v) => v,
            // A mapping starts on a page boundary and its length is a multiple of 4.
            Kept::File { map, .. } => bytemuck::cast_slice(&map[..]),
        }
    }

    /// Writes `data` (whole rows) at element offset `at`.
    pub(super) fn write(&mut self, at: usize, data: &[f32]) -> Result<()> {
        match self {
            Kept::Mem(v) => {
                v[at..at + data.len()].copy_from_slice(data);
                Ok(())
            }
            Kept::File { file, .. } => {
                use std::io::{Seek, SeekFrom, Write};
                file.seek(SeekFrom::Start((at * 4) as u64))
                    .and_then(|_| file.write_all(bytemuck::cast_slice(data)))
                    .map_err(|e| InferError::Infer(format!("writing a scratch file: {e}")))
            }
        }
    }
}

/// Copies rows `ids` of a row-major matrix with `cols` columns into a tensor.
pub(super) fn gather_rows(data: &[f32], cols: usize, ids: &[u32]) -> Tensor {
    let mut t = Tensor::scratch(ids.len(), cols);
    if cols > 0 {
        t.data
            .par_chunks_mut(cols)
            .zip(ids.par_iter())
            .for_each(|(dst, &v)| {
                let v = v as usize;
                dst.copy_from_slice(&data[v * cols..(v + 1) * cols]);
            });
    }
    t
}
