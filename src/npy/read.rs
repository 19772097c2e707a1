//! Reading `.npy`: [`open_npy`] vets the preamble and header itself (bounded, one pass)
//! and hands npyz a canonical header, so npyz's parser never sees input text; [`Npy`]
//! streams a file's elements as f64.

use std::fs::File;
use std::io::{BufReader, Chain, Cursor, Read};
use std::path::Path;

use super::{parse_npy_header, NpyError};

/// Longest NPY header text read: numpy's own default limit (`np.load(max_header_size=
/// 10000)`). A plain array's header is under 128 bytes.
pub const MAX_NPY_HEADER_BYTES: usize = 10_000;

/// An NPY stream whose header was vetted: a canonical header in front of the rest.
pub type VettedNpy<R> = npyz::NpyFile<Chain<Cursor<Vec<u8>>, R>>;

/// Opens an NPY stream through npyz after reading its preamble and header ourselves, since
/// npyz takes them on trust: it allocates the declared header length (a u32, up to 4 GiB)
/// before reading it, and parses the text with a backtracking parser whose time explodes on
/// hostile input (a header 16 `[` deep took 30 s, and a 1 KB one of nested numeric
/// literals over 30 s, both found by fuzzing). Here the header is at most
/// [`MAX_NPY_HEADER_BYTES`] and must be the plain dictionary numpy writes for a simple
/// dtype (`{'descr': '<f4', 'fortran_order': False, 'shape': (2708, 1433), }`, keys in any
/// order), read by [`parse_npy_header`] in one pass; npyz is then given a header written
/// anew from the parsed fields, so its parser never sees input text. Structured dtypes,
/// which no importer reads, are refused. The error is a bare message; callers add the
/// file (and member).
///
/// `total`, when known, is the stream's whole length (a file's size, an npz member's
/// uncompressed size): the data the header declares (shape × item size) must fill it
/// exactly, so a header declaring more than the input holds (issue 55: an npz member
/// declaring (20, 2⁴⁰) made a reader allocate 8 TiB) is refused before any allocation,
/// and so are bytes after the data.
pub fn open_npy<R: Read>(mut r: R, total: Option<u64>) -> Result<VettedNpy<R>, String> {
    let eof = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "not a valid NPY file: truncated header".to_string(),
        _ => format!("not a valid NPY file: reading the header: {e}"),
    };
    let mut head = [0u8; 8];
    r.read_exact(&mut head).map_err(eof)?;
    if &head[..6] != b"\x93NUMPY" {
        return Err("not a valid NPY file: magic not found".into());
    }
    let len_bytes = match (head[6], head[7]) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        (a, b) => {
            return Err(format!(
                "not a valid NPY file: unsupported version ({a}, {b})"
            ))
        }
    };
    let mut len = [0u8; 4];
    r.read_exact(&mut len[..len_bytes]).map_err(eof)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_NPY_HEADER_BYTES {
        return Err(format!(
            "not a valid NPY file: header of {len} bytes, expected at most {MAX_NPY_HEADER_BYTES}"
        ));
    }
    let mut text = vec![0u8; len];
    r.read_exact(&mut text).map_err(eof)?;
    let h = parse_npy_header(&text).map_err(|e| format!("not a valid NPY file: header: {e}"))?;
    if let (Some(total), Some(item)) = (total, item_bytes(&h.descr)) {
        let head = (8 + len_bytes + len) as u64;
        let have = total.saturating_sub(head);
        let want = h
            .shape
            .iter()
            .fold(u128::from(item), |a, &d| a.saturating_mul(u128::from(d)));
        if want > u128::from(have) {
            return Err(format!(
                "truncated: the header declares shape {:?} of {}, {want} bytes of data, but {have} follow the header",
                h.shape, h.descr
            ));
        }
        if want < u128::from(have) {
            return Err(format!(
                "{} bytes after the data of shape {:?} of {}, expected none (trailing garbage?)",
                u128::from(have) - want,
                h.shape,
                h.descr
            ));
        }
    }
    npyz::NpyFile::new(Cursor::new(h.canonical()).chain(r))
        .map_err(|e| format!("not a valid NPY file: {e}"))
}

/// The bytes of one item of a plain dtype (`<f8` → 8, `|b1` → 1, `|S3` → 3, `<U3` → 12);
/// None for others (objects, structured), which the readers refuse anyway.
fn item_bytes(descr: &str) -> Option<u64> {
    let b = descr.as_bytes();
    match b {
        [b'<' | b'>' | b'|' | b'=', k, ..] if b"biufcS".contains(k) => descr[2..].parse().ok(),
        [b'<' | b'>' | b'|' | b'=', b'U', ..] => descr[2..].parse::<u64>().ok()?.checked_mul(4),
        _ => None,
    }
}

/// The dtype string of a plain (not structured) array: `<f4`, `<i8`, `|b1`, ...; the
/// error is a bare message, as [`open_npy`]'s.
pub fn plain_dtype<R: Read>(file: &npyz::NpyFile<R>) -> Result<String, String> {
    match file.dtype() {
        npyz::DType::Plain(t) => Ok(t.to_string()),
        other => Err(format!("unsupported dtype {}", other.descr())),
    }
}

/// An NPY file opened for streaming, with its element type resolved.
pub struct Npy {
    file: VettedNpy<BufReader<File>>,
    /// Shape as stored.
    pub shape: Vec<u64>,
    type_str: String,
}

impl Npy {
    /// Opens an `.npy` file; must be C order.
    pub fn open(path: &Path) -> Result<Self, NpyError> {
        let f = File::open(path).map_err(|e| NpyError::io(path, "open", e))?;
        let meta = f.metadata().map_err(|e| NpyError::io(path, "stat", e))?;
        if !meta.is_file() {
            return Err(NpyError::input(
                path,
                if meta.is_dir() {
                    "a directory, expected an .npy file"
                } else {
                    "not a regular file, expected an .npy file"
                },
            ));
        }
        let file = open_npy(BufReader::with_capacity(1 << 20, f), Some(meta.len()))
            .map_err(|e| NpyError::input(path, e))?;
        if file.order() != npyz::Order::C {
            return Err(NpyError::input(
                path,
                "array is in Fortran order, expected C order",
            ));
        }
        let type_str = plain_dtype(&file).map_err(|e| NpyError::input(path, e))?;
        Ok(Npy {
            shape: file.shape().to_vec(),
            file,
            type_str,
        })
    }

    /// Streams the elements as f64 (from f4/f8/integers), calling `each` in order; `each`
    /// stops the stream with its own error, into which this one's convert.
    pub fn for_each_f64<E: From<NpyError>>(
        self,
        path: &Path,
        mut each: impl FnMut(f64) -> Result<(), E>,
    ) -> Result<(), E> {
        let read_err =
            |e: std::io::Error| NpyError::input(path, format!("reading array data: {e}"));
        macro_rules! stream {
            ($t:ty) => {{
                let data = self
                    .file
                    .data::<$t>()
                    .map_err(|e| NpyError::input(path, e.to_string()))?;
                for x in data {
                    each(x.map_err(read_err)? as f64)?;
                }
            }};
        }
        match self.type_str.as_str() {
            "<f4" => stream!(f32),
            "<f8" => stream!(f64),
            "<i4" => stream!(i32),
            "<i8" => stream!(i64),
            "|u1" | "<u1" => stream!(u8),
            "|i1" | "<i1" => stream!(i8),
            "|b1" => {
                let data = self
                    .file
                    .data::<bool>()
                    .map_err(|e| NpyError::input(path, e.to_string()))?;
                for x in data {
                    each(if x.map_err(read_err)? { 1.0 } else { 0.0 })?;
                }
            }
            t => {
                return Err(NpyError::input(
                    path,
                    format!("unsupported dtype {t}, expected little-endian float or integer"),
                )
                .into())
            }
        }
        Ok(())
    }

    /// Whether the elements are integers (or booleans).
    pub fn is_integer(&self) -> bool {
        !self.type_str.contains('f')
    }
}
