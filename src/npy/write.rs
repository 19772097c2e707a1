//! Writing `.npy`: [`NpyWriter`] fills a `[rows, cols]` f32 array by row blocks into an
//! [`AtomicFile`], so a reader never sees a partial file and a failed or dropped write
//! leaves the destination as it was; [`write_npy_atomic`] is it for a matrix given row by
//! row.

use std::path::Path;

use crate::atomic::AtomicFile;

use super::{NpyError, NpyHeader};

/// A NumPy `.npy` file (format 1.0, little-endian f32, C order) `[rows, cols]` written
/// atomically: a temporary file beside the destination, its blocks reserved up front (a
/// full disk is an error here, before any work), filled by row blocks with positioned
/// writes, then fsynced, renamed over the destination and the directory fsynced. Dropped
/// without [`NpyWriter::finish`], it removes the temporary file.
pub struct NpyWriter {
    out: AtomicFile,
    header: usize,
    cols: usize,
}

impl NpyWriter {
    /// Creates the temporary file for a `[rows, cols]` array bound for `path`.
    pub fn create(path: &Path, rows: usize, cols: usize) -> Result<NpyWriter, NpyError> {
        let header = NpyHeader::f32_matrix(rows, cols).canonical();
        let total = header.len() + rows * cols * 4;
        let mut out = AtomicFile::create(path).map_err(|e| NpyError::io(path, "create", e))?;
        crate::atomic::reserve(out.file(), path, total as u64, "the output")?;
        out.write_at(0, &header)
            .map_err(|e| NpyError::io(path, "write", e))?;
        Ok(NpyWriter {
            out,
            header: header.len(),
            cols,
        })
    }

    /// Writes rows r0.. (`data` holds whole rows).
    pub fn write_rows(&mut self, r0: usize, data: &[f32]) -> Result<(), NpyError> {
        let at = self.header + r0 * self.cols * 4;
        self.out
            .write_at(at as u64, bytemuck::cast_slice(data))
            .map_err(|e| NpyError::io(self.out.path(), "write", e))
    }

    /// Fsyncs and renames the file into place.
    pub fn finish(self) -> Result<(), NpyError> {
        let path = self.out.path().to_path_buf();
        self.out
            .commit()
            .map_err(|e| NpyError::io(&path, "write", e))
    }
}

/// Writes a `[rows, cols]` f32 matrix as `.npy` atomically through an [`NpyWriter`];
/// `row(i, out)` fills row i.
pub fn write_npy_atomic(
    path: &Path,
    rows: usize,
    cols: usize,
    mut row: impl FnMut(usize, &mut [f32]),
) -> Result<(), NpyError> {
    let mut w = NpyWriter::create(path, rows, cols)?;
    // 4 MiB of rows at a time.
    let block = ((4 << 20) / (4 * cols.max(1))).max(1);
    let mut buf = vec![0f32; block * cols];
    let mut r0 = 0;
    while r0 < rows {
        let n = block.min(rows - r0);
        for i in 0..n {
            row(r0 + i, &mut buf[i * cols..(i + 1) * cols]);
        }
        w.write_rows(r0, &buf[..n * cols])?;
        r0 += n;
    }
    w.finish()
}
