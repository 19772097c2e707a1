//! NumPy `.npy` files, read and written in one place: the header ([`NpyHeader`], parsed
//! strictly by [`parse_npy_header`], written by [`NpyHeader::canonical`]), the reader
//! ([`open_npy`] for any stream, an npz member included; [`Npy`] for a file, streamed as
//! f64; [`MappedF32`] for an f32 matrix read in place, as an `ndarray` view) and the writer
//! ([`NpyWriter`], [`write_npy_atomic`]: f32 matrices, atomically).
//!
//! A leaf above [`crate::atomic`] only: importers (`store::import`), inference
//! (`infer`) and embeddings (`embedding`) use it, each turning [`NpyError`] into its
//! own error with the same message, which names the file.

mod header;
mod map;
mod read;
mod write;

use std::path::{Path, PathBuf};

pub use header::{parse_npy_header, NpyHeader};
pub use map::MappedF32;
pub use read::{open_npy, plain_dtype, Npy, VettedNpy, MAX_NPY_HEADER_BYTES};
pub use write::{write_npy_atomic, NpyWriter};

/// Errors of reading or writing a `.npy` file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// An operating-system error on the file.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What we were doing ("open", "create", "write").
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Disk space for an output could not be reserved (checked before any row is
    /// written, so a full disk never shows up half-way).
    #[error(transparent)]
    Space(#[from] crate::atomic::NoSpace),
    /// The file is not an array we read (its header, dtype, order or data).
    #[error("{}: {what}", path.display())]
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl NpyError {
    /// An I/O error on `path` while doing `op`.
    pub fn io(path: &Path, op: &'static str, source: std::io::Error) -> NpyError {
        NpyError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }

    /// A file at `path` that is not a readable array.
    pub fn input(path: &Path, what: impl Into<String>) -> NpyError {
        NpyError::Input {
            path: path.to_path_buf(),
            what: what.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> Result<(Vec<u64>, Vec<f64>), NpyError> {
        let npy = Npy::open(path)?;
        let shape = npy.shape.clone();
        let mut v = Vec::new();
        npy.for_each_f64(path, |x| {
            v.push(x);
            Ok::<(), NpyError>(())
        })?;
        Ok((shape, v))
    }

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.npy");
        // 3 × 5 rows through write_npy_atomic, then over it by NpyWriter's row blocks.
        write_npy_atomic(&path, 3, 5, |i, r| {
            for (c, x) in r.iter_mut().enumerate() {
                *x = (10 * i + c) as f32;
            }
        })
        .unwrap();
        let (shape, v) = read_all(&path).unwrap();
        assert_eq!(shape, [3, 5]);
        assert_eq!(
            v,
            (0..3)
                .flat_map(|i| (0..5).map(move |c| (10 * i + c) as f64))
                .collect::<Vec<_>>()
        );
        let mut w = NpyWriter::create(&path, 4, 2).unwrap();
        w.write_rows(2, &[5.0, 6.0, 7.0, 8.0]).unwrap();
        w.write_rows(0, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        w.finish().unwrap();
        assert_eq!(
            read_all(&path).unwrap(),
            (vec![4, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
        );
        // The data starts where numpy puts it: after the header padded to a multiple of
        // 64 bytes (10 + 59 + 1 → 128).
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 128 + 8 * 4);
        // An empty matrix too.
        write_npy_atomic(&path, 0, 7, |_, _| unreachable!()).unwrap();
        assert_eq!(read_all(&path).unwrap(), (vec![0, 7], vec![]));
        // A writer dropped before `finish` changes nothing and leaves no temporary.
        NpyWriter::create(&path, 2, 2)
            .unwrap()
            .write_rows(0, &[1.0; 4])
            .unwrap();
        assert_eq!(read_all(&path).unwrap(), (vec![0, 7], vec![]));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["m.npy"]);
    }

    #[test]
    fn issue55_the_declared_shape_must_fill_the_file_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        let write = |shape: &[u64], descr: &str, data: usize| {
            let h = NpyHeader {
                descr: descr.into(),
                fortran_order: false,
                shape: shape.to_vec(),
            };
            std::fs::write(&path, [h.canonical(), vec![0u8; data]].concat()).unwrap();
        };
        write(&[3, 2], "<f4", 24);
        assert_eq!(read_all(&path).unwrap().0, [3, 2]);
        for (shape, descr, data, words) in [
            (
                &[20, 1 << 40][..],
                "<f8",
                24,
                "truncated: the header declares shape [20, 1099511627776] of <f8",
            ),
            (&[3, 2], "<f4", 23, "truncated"),
            (&[3, 2], "<f4", 25, "1 bytes after the data of shape [3, 2]"),
            (&[2], "|S3", 7, "1 bytes after the data"),
            (&[2], "<U2", 15, "truncated"),
        ] {
            write(shape, descr, data);
            let e = Npy::open(&path).err().expect("refused").to_string();
            assert!(
                e.contains("a.npy") && e.contains(words),
                "{shape:?} {descr} {data}: {e}"
            );
        }
        // Without a known length (a stream), the header alone decides.
        write(&[3, 2], "<f4", 25);
        let f = std::fs::File::open(&path).unwrap();
        assert!(open_npy(f, None).is_ok());
        let e = Npy::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("a directory, expected an .npy file"), "{e}");
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.npy");
        let e = Npy::open(&missing).err().unwrap().to_string();
        assert!(e.contains("missing.npy: cannot open"), "{e}");
        let bad = dir.path().join("bad.npy");
        std::fs::write(&bad, b"\x93NUMPY garbage").unwrap();
        let e = Npy::open(&bad).err().unwrap().to_string();
        assert!(e.contains("bad.npy: not a valid NPY file"), "{e}");
        let e = NpyWriter::create(&dir.path().join("no/such/dir/out.npy"), 1, 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("out.npy") && e.contains("cannot create"), "{e}");
    }
}
