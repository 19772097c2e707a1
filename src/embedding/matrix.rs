//! The embedding and context matrices as memory-mapped files, so |V|·d may exceed RAM (the
//! page cache holds the hot rows). The vertex matrix can live in the output `.npy` itself:
//! a temporary file beside the destination (reserved on disk up front), published by one
//! atomic rename when training ends ([`crate::atomic::AtomicFile`]); the context matrix, and
//! a vertex matrix with no output, live in scratch files unlinked as soon as they are made.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{Advice, MmapMut};

use crate::atomic::AtomicFile;

/// A row-major [rows, dim] f32 matrix in a mapped file.
pub struct MappedMatrix {
    map: MmapMut,
    offset: usize,
    rows: usize,
    dim: usize,
    out: Option<AtomicFile>,
    _file: Option<File>,
}

/// Where a map failed: the file and the OS error.
#[derive(Debug)]
pub struct MatrixIo {
    /// The file.
    pub path: PathBuf,
    /// What was being done.
    pub op: &'static str,
    /// The OS error.
    pub source: io::Error,
}

fn at<'p>(path: &'p Path, op: &'static str) -> impl FnOnce(io::Error) -> MatrixIo + 'p {
    move |source| MatrixIo {
        path: path.to_path_buf(),
        op,
        source,
    }
}

static SCRATCH: AtomicU64 = AtomicU64::new(0);

fn bytes_of(rows: usize, dim: usize, path: &Path) -> Result<usize, MatrixIo> {
    rows.checked_mul(dim)
        .and_then(|x| x.checked_mul(4))
        .ok_or_else(|| MatrixIo {
            path: path.to_path_buf(),
            op: "size",
            source: io::Error::other(format!("{rows} × {dim} f32 overflows")),
        })
}

impl MappedMatrix {
    /// A zeroed matrix in an unlinked scratch file under `dir` (its blocks reserved).
    pub fn scratch(dir: &Path, rows: usize, dim: usize) -> Result<MappedMatrix, MatrixIo> {
        let k = SCRATCH.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".saintflow-emb-{}-{k}.tmp", std::process::id()));
        let bytes = bytes_of(rows, dim, &path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(at(&path, "create the scratch file"))?;
        // Unlinked at once: nothing is left behind whatever happens next.
        std::fs::remove_file(&path).map_err(at(&path, "unlink the scratch file"))?;
        if bytes > 0 {
            fs4::fs_std::FileExt::allocate(&file, bytes as u64)
                .map_err(at(&path, "reserve disk space for"))?;
        }
        let map = map(&file, bytes, &path)?;
        Ok(MappedMatrix {
            map,
            offset: 0,
            rows,
            dim,
            out: None,
            _file: Some(file),
        })
    }

    /// A zeroed matrix that is the data of a `.npy` bound for `path` (`header` first),
    /// published by [`MappedMatrix::publish`]; dropped unpublished, the file is removed.
    pub fn npy_output(
        path: &Path,
        header: &[u8],
        rows: usize,
        dim: usize,
    ) -> Result<MappedMatrix, MatrixIo> {
        let bytes = bytes_of(rows, dim, path)? + header.len();
        let mut out = AtomicFile::create(path).map_err(at(path, "create"))?;
        fs4::fs_std::FileExt::allocate(out.file(), bytes as u64)
            .map_err(at(path, "reserve disk space for"))?;
        out.write_at(0, header).map_err(at(path, "write"))?;
        let map = map(out.file(), bytes, path)?;
        Ok(MappedMatrix {
            map,
            offset: header.len(),
            rows,
            dim,
            out: Some(out),
            _file: None,
        })
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (the embedding dim).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The matrix, row-major.
    pub fn data(&self) -> &[f32] {
        bytemuck::cast_slice(&self.map[self.offset..self.offset + self.rows * self.dim * 4])
    }

    /// The matrix, row-major, writable.
    pub fn data_mut(&mut self) -> &mut [f32] {
        let end = self.offset + self.rows * self.dim * 4;
        bytemuck::cast_slice_mut(&mut self.map[self.offset..end])
    }

    /// Flushes the map and renames the `.npy` into place (fsyncs included).
    pub fn publish(self) -> Result<(), MatrixIo> {
        let MappedMatrix { map, out, .. } = self;
        let Some(out) = out else {
            return Ok(());
        };
        let path = out.path().to_path_buf();
        map.flush().map_err(at(&path, "write"))?;
        drop(map);
        out.commit().map_err(at(&path, "write"))
    }
}

fn map(file: &File, bytes: usize, path: &Path) -> Result<MmapMut, MatrixIo> {
    if bytes == 0 {
        return MmapMut::map_anon(0).map_err(at(path, "map"));
    }
    // SAFETY: the file is ours (created here, unlinked or a locked temporary), so nothing
    // else changes it while mapped.
    let map = unsafe { MmapMut::map_mut(file) }.map_err(at(path, "map"))?;
    // SGD touches rows in sample order: read-ahead would only evict hot rows.
    let _ = map.advise(Advice::Random);
    Ok(map)
}
