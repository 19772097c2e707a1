//! An f32 matrix `.npy` (what `embed`, `embed --logits` and `[embedding]` plans write) read
//! in place through a memory map: [`MappedF32::view`] is an `ndarray::ArrayView2<f32>` over
//! the file's pages, so an embedding larger than memory is read without loading it.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use super::{parse_npy_header, NpyError, MAX_NPY_HEADER_BYTES};

/// A little-endian f32 `[rows, cols]` C-order `.npy`, mapped.
pub struct MappedF32 {
    map: Mmap,
    offset: usize,
    rows: usize,
    cols: usize,
}

impl MappedF32 {
    /// Maps `path` and checks its header: magic and version, the strict header dictionary,
    /// dtype `<f4`, C order, two dimensions, and a data section of exactly rows × cols
    /// values (a truncated or padded file is an error naming it, never a short view).
    ///
    /// The file must not be changed while mapped (saintflow's writers publish by rename,
    /// so a file they replace stays as it was under an existing map).
    pub fn open(path: &Path) -> Result<MappedF32, NpyError> {
        let bad = |what: String| NpyError::input(path, what);
        let file = File::open(path).map_err(|e| NpyError::io(path, "open", e))?;
        // SAFETY: read-only map of a file the caller does not change while it is mapped
        // (the documented contract above); every access is bounds-checked below.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| NpyError::io(path, "map", e))?;
        let b = &map[..];
        if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
            return Err(bad("not a valid NPY file: magic not found".into()));
        }
        let (len, start) = match (b[6], b[7]) {
            (1, 0) => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
            (2, 0) | (3, 0) if b.len() >= 12 => {
                (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
            }
            (x, y) => {
                return Err(bad(format!(
                    "not a valid NPY file: unsupported version ({x}, {y})"
                )))
            }
        };
        if len > MAX_NPY_HEADER_BYTES || start + len > b.len() {
            return Err(bad(format!(
                "not a valid NPY file: header of {len} bytes in a file of {}",
                b.len()
            )));
        }
        let h = parse_npy_header(&b[start..start + len])
            .map_err(|e| bad(format!("not a valid NPY file: header: {e}")))?;
        if h.descr != "<f4" || h.fortran_order {
            return Err(bad(format!(
                "dtype {} ({} order), expected <f4 in C order",
                h.descr,
                if h.fortran_order { "Fortran" } else { "C" }
            )));
        }
        let [rows, cols] = h.shape[..] else {
            return Err(bad(format!(
                "expected a 2-D array [rows, cols], got shape {:?}",
                h.shape
            )));
        };
        let offset = start + len;
        let want = (rows as u128) * (cols as u128) * 4;
        let have = (b.len() - offset) as u128;
        if want != have {
            return Err(bad(format!(
                "the header says {rows} × {cols} f32 ({want} bytes), the file holds {have} bytes of data"
            )));
        }
        if offset % std::mem::align_of::<f32>() != 0 {
            return Err(bad(format!(
                "the data starts at byte {offset}, not a multiple of 4"
            )));
        }
        Ok(MappedF32 {
            map,
            offset,
            rows: rows as usize,
            cols: cols as usize,
        })
    }

    /// Tells the kernel the rows will be read in no order (MADV_RANDOM): a fault reads its
    /// page, not the readahead window (128 KiB for a row of a few hundred bytes, which,
    /// on a map larger than the page cache left to it, thrashed: scoring link pairs of a
    /// scale-22 graph's z under `memcap 2G`).
    pub fn advise_random(&self) {
        let _ = self.map.advise(memmap2::Advice::Random);
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The values, row-major.
    pub fn as_slice(&self) -> &[f32] {
        bytemuck::cast_slice(&self.map[self.offset..])
    }

    /// The matrix as an `ndarray` view over the map (no copy).
    ///
    /// ```
    /// use saintflow::npy::{MappedF32, NpyWriter};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("emb.npy");
    /// let mut w = NpyWriter::create(&path, 3, 2)?;
    /// w.write_rows(0, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// w.finish()?;
    /// let emb = MappedF32::open(&path)?;
    /// let v = emb.view();
    /// assert_eq!(v.shape(), &[3, 2]);
    /// assert_eq!(v[[2, 1]], 6.0);
    /// assert_eq!(v.column(0).sum(), 9.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn view(&self) -> ndarray::ArrayView2<'_, f32> {
        ndarray::ArrayView2::from_shape((self.rows, self.cols), self.as_slice())
            .expect("the length was checked against rows × cols at open")
    }
}
