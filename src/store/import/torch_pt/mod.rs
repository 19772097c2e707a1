//! A strict reader of `torch.save` files (`.pt`) holding a dict of integer arrays: what
//! OGB's link-property splits are (`split/<name>/{train,valid,test}.pt`, issue 52).
//!
//! **Container.** `torch.save` (PyTorch ≥ 1.6) writes a zip archive whose members are
//! *stored* (not compressed) under one prefix directory: `<prefix>/data.pkl` (the pickle),
//! `<prefix>/data/<key>` (each storage's raw little-endian bytes), `<prefix>/version`, and
//! in newer releases `<prefix>/byteorder` and `<prefix>/.data/serialization_id`. The older
//! non-zip layout (before 1.6) and a compressed member are refused.
//!
//! **Pickle.** A small pickle machine runs exactly the opcodes Python's pickler emits at
//! protocol 2 (torch's default) for a dict of tensors or of numpy arrays: PROTO, STOP,
//! MARK, EMPTY_DICT / EMPTY_LIST / EMPTY_TUPLE, TUPLE / TUPLE1-3, SETITEM(S), APPEND(S),
//! BINUNICODE, SHORT_BINBYTES / BINBYTES, BININT / BININT1 / BININT2 / LONG1, NONE,
//! NEWTRUE / NEWFALSE, GLOBAL, REDUCE, BUILD, BINPERSID, BINPUT / LONG_BINPUT, BINGET /
//! LONG_BINGET. Any other opcode is refused with the file, its offset and its name. GLOBAL
//! and REDUCE build inert records, never calls: the globals are matched by name afterwards
//! against the few this reader knows (`torch._utils._rebuild_tensor_v2`, `torch.*Storage`,
//! `collections.OrderedDict`, `numpy.core.multiarray._reconstruct` (and numpy 2's
//! `numpy._core`), `numpy.ndarray`, `numpy.dtype`, `_codecs.encode`), so no pickle can
//! make this reader do anything but describe data.
//!
//! **Values.** The pickle's root must be a dict of string keys; each value a tensor
//! (`_rebuild_tensor_v2(persistent storage, offset, size, stride, requires_grad, hooks[,
//! metadata])`, its storage a member of the archive) or a numpy array (`_reconstruct`
//! then BUILD with `(1, shape, dtype, fortran, data)`; OGB's split files have held both,
//! which is why OGB's loaders call `replace_numpy_with_torchtensor`). Only integer
//! dtypes are read as integers (int64, int32; a float array where integers are expected is
//! an error naming the key and dtype). Sizes are checked before anything in proportion to
//! them is allocated: a member's declared size against the file's length (and `data.pkl`
//! against [`limits::check_memory`]), a storage's byte length against its element count,
//! every element a view reaches against its storage; values nest at most 32 deep (`MAX_DEPTH`).
//!
//! Here the container and [`PtFile`]; the pickle machine in pickle.rs, values to arrays in
//! values.rs.
//!
//! **Memory.** [`PtFile::for_each_int`] streams: a contiguous tensor's storage is read in
//! 1 MiB chunks (to its end, so its CRC is checked), a numpy array's bytes are decoded
//! where they lie in the pickle (protocol 2 writes them as latin-1 text, each byte above
//! 0x7F two UTF-8 bytes; they are never copied out), and only a strided view reads its
//! storage whole. What is held is the pickle (small for tensors; the arrays themselves
//! for numpy) plus what the caller keeps.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use npyz::zip::{CompressionMethod, ZipArchive};

use crate::store::import::limits;
use crate::store::StoreError;

mod pickle;
mod values;

use pickle::Machine;
use values::describe;

/// Element type of an array in a `.pt` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtDtype {
    /// torch.int64 / numpy `<i8`.
    I64,
    /// torch.int32 / numpy `<i4`.
    I32,
    /// Any other dtype, by its name (`FloatStorage`, `<f4`, ...): described, never read.
    Other(&'static str),
}

impl PtDtype {
    /// Bytes per element (0 for [`PtDtype::Other`]).
    fn size(self) -> u64 {
        match self {
            PtDtype::I64 => 8,
            PtDtype::I32 => 4,
            PtDtype::Other(_) => 0,
        }
    }

    /// The name in messages.
    pub fn name(self) -> &'static str {
        match self {
            PtDtype::I64 => "int64",
            PtDtype::I32 => "int32",
            PtDtype::Other(s) => s,
        }
    }
}

/// Where an array's elements are.
#[derive(Debug, Clone)]
enum Data {
    /// A storage member of the archive: `<prefix>/data/<key>`, `numel` elements.
    Storage { key: String, numel: u64 },
    /// Inline bytes of a numpy array, C order.
    Inline(Inline),
}

/// Where a numpy array's bytes are in the pickle: they are never copied out of it (a
/// split of 10⁸ ids would otherwise be held two or three times).
#[derive(Debug, Clone)]
enum Inline {
    /// Decoded from a short string (copied: it is small).
    Owned(Rc<Vec<u8>>),
    /// BINBYTES (protocol 3+): the bytes as they are in the pickle.
    Raw { start: usize, len: usize },
    /// A BINUNICODE of characters ≤ U+00FF (protocol 2's `_codecs.encode(s, 'latin1')`):
    /// UTF-8 in the pickle, each character one byte once decoded; `bytes` decoded.
    Latin1 {
        start: usize,
        len: usize,
        bytes: u64,
    },
}

impl Inline {
    /// Bytes once decoded.
    fn len(&self) -> u64 {
        match self {
            Inline::Owned(b) => b.len() as u64,
            Inline::Raw { len, .. } => *len as u64,
            Inline::Latin1 { bytes, .. } => *bytes,
        }
    }

    /// The decoded bytes, in order.
    fn bytes<'a>(&'a self, pickle: &'a [u8]) -> Box<dyn Iterator<Item = u8> + 'a> {
        match self {
            Inline::Owned(b) => Box::new(b.iter().copied()),
            Inline::Raw { start, len } => Box::new(pickle[*start..start + len].iter().copied()),
            Inline::Latin1 { start, len, .. } => {
                let mut it = pickle[*start..start + len].iter().copied();
                // Vetted by `latin1_len`: ASCII, or 0xC2 / 0xC3 and a continuation byte.
                Box::new(std::iter::from_fn(move || {
                    let b = it.next()?;
                    Some(match b {
                        0xC2 => it.next()? & 0x3F | 0x80,
                        0xC3 => it.next()? & 0x3F | 0xC0,
                        b => b,
                    })
                }))
            }
        }
    }
}

/// The decoded length of UTF-8 text whose characters are all ≤ U+00FF, or None.
fn latin1_len(utf8: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    let mut i = 0;
    while i < utf8.len() {
        match utf8[i] {
            0x00..=0x7F => i += 1,
            0xC2 | 0xC3 => i += 2,
            _ => return None,
        }
        n += 1;
    }
    (i == utf8.len()).then_some(n)
}

/// One array of the dict, described; its elements are read by [`PtFile::ints`].
#[derive(Debug, Clone)]
pub struct PtArray {
    /// Element type.
    pub dtype: PtDtype,
    /// Shape.
    pub shape: Vec<u64>,
    /// Strides in elements (C order for numpy arrays).
    stride: Vec<u64>,
    /// First element's offset in the storage, in elements.
    offset: u64,
    data: Data,
}

impl PtArray {
    /// Number of elements (the product of the shape).
    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An opened `.pt` file: its dict's keys and arrays, in the pickle's order.
pub struct PtFile {
    path: PathBuf,
    zip: ZipArchive<BufReader<File>>,
    prefix: String,
    /// `data.pkl`, which numpy arrays' bytes stay in.
    pickle: Vec<u8>,
    /// The dict's entries.
    pub entries: Vec<(String, PtArray)>,
}

/// The most members a `.pt` archive may list (OGB's hold 4 to 8).
const MAX_MEMBERS: usize = 1 << 16;

impl PtFile {
    /// Opens `path` and runs its pickle; the arrays are described, not read.
    pub fn open(path: &Path) -> Result<PtFile, StoreError> {
        let bad = |what: String| StoreError::input(path, what);
        let file = File::open(path).map_err(|e| StoreError::io(path, "open", e))?;
        let meta = file
            .metadata()
            .map_err(|e| StoreError::io(path, "stat", e))?;
        if !meta.is_file() {
            return Err(bad(
                "not a regular file, expected a torch.save .pt file".into()
            ));
        }
        let file_len = meta.len();
        let mut magic = [0u8; 4];
        let got = std::io::Read::read(&mut &file, &mut magic).unwrap_or(0);
        if got < 4 || &magic != b"PK\x03\x04" {
            return Err(bad(format!(
                "not a zip archive (starts with {:02x?}), expected torch.save's zip format (PyTorch ≥ 1.6; re-save an older file with a recent torch)",
                &magic[..got]
            )));
        }
        let mut zip = ZipArchive::new(BufReader::new(file)).map_err(|e| {
            bad(format!(
                "not a valid zip archive (truncated or damaged?): {e}"
            ))
        })?;
        if zip.len() > MAX_MEMBERS {
            return Err(bad(format!(
                "{} members, expected at most {MAX_MEMBERS}",
                zip.len()
            )));
        }
        // The one prefix: the directory of `data.pkl`.
        let names: Vec<String> = zip.file_names().map(str::to_string).collect();
        let pkl: Vec<&String> = names
            .iter()
            .filter(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
            .collect();
        let prefix = match pkl.as_slice() {
            [one] => one.trim_end_matches("data.pkl").to_string(),
            [] => {
                return Err(bad(
                    "no <prefix>/data.pkl member, expected torch.save's layout".into(),
                ))
            }
            _ => return Err(bad("several data.pkl members, expected one".into())),
        };
        if let Some(n) = names.iter().find(|n| !n.starts_with(&prefix)) {
            return Err(bad(format!(
                "member {n:?} outside the archive's prefix {prefix:?}"
            )));
        }
        let pickle = read_member(&mut zip, path, &format!("{prefix}data.pkl"), file_len)?;
        let root = Machine::new(path).run(&pickle)?;
        let entries = describe(path, &root, &pickle)?;
        Ok(PtFile {
            path: path.to_path_buf(),
            zip,
            prefix,
            pickle,
            entries,
        })
    }

    /// The array under `key`, or None.
    pub fn get(&self, key: &str) -> Option<&PtArray> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, a)| a)
    }

    /// The keys, in order.
    pub fn keys(&self) -> Vec<&str> {
        self.entries.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The elements of array `key` in C order as i64 (see [`for_each_int`](Self::for_each_int)),
    /// held: checked against memory first.
    pub fn ints(&mut self, key: &str) -> Result<Vec<i64>, StoreError> {
        let n = self.get(key).map_or(0, PtArray::len);
        limits::check_memory(
            &self.path,
            &format!("key {key:?}: {n} elements"),
            u128::from(n) * 8,
        )?;
        let mut out = Vec::new();
        out.try_reserve_exact(n as usize).map_err(|_| {
            StoreError::input(
                &self.path,
                format!("key {key:?}: cannot allocate {n} elements"),
            )
        })?;
        self.for_each_int(key, |_, x| {
            out.push(x);
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `each(i, x)` for the elements of array `key` in C order, as i64: an integer
    /// dtype is required and every element the view reaches must lie in its storage. A
    /// contiguous tensor streams from its member (O(1) memory, its CRC checked at the end);
    /// a strided one reads its storage whole; a numpy array's bytes are decoded in place.
    pub fn for_each_int(
        &mut self,
        key: &str,
        mut each: impl FnMut(u64, i64) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let bad = |what: String| StoreError::input(&path, format!("key {key:?}: {what}"));
        let a = self.get(key).ok_or_else(|| bad("absent".into()))?.clone();
        if let PtDtype::Other(t) = a.dtype {
            return Err(bad(format!(
                "dtype {t}, expected an integer array (int64 or int32)"
            )));
        }
        let elem = a.dtype.size();
        let n = a.len();
        let storage_len = match &a.data {
            Data::Inline(b) => {
                if !b.len().is_multiple_of(elem) {
                    return Err(bad(format!(
                        "data of {} bytes is not a whole number of {elem}-byte elements",
                        b.len()
                    )));
                }
                b.len() / elem
            }
            Data::Storage { numel, .. } => *numel,
        };
        if n > 0 {
            // The furthest element the view reaches.
            let mut last = a.offset as u128;
            for (&s, &d) in a.stride.iter().zip(&a.shape) {
                last += u128::from(d - 1) * u128::from(s);
            }
            if last >= u128::from(storage_len) {
                return Err(bad(format!(
                    "shape {:?} (stride {:?}, offset {}) reaches element {last}, but its storage holds {storage_len}",
                    a.shape, a.stride, a.offset
                )));
            }
        }
        let value = |b: &[u8]| -> i64 {
            match a.dtype {
                PtDtype::I64 => i64::from_le_bytes(b.try_into().expect("8 bytes")),
                PtDtype::I32 => i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))),
                PtDtype::Other(_) => unreachable!("refused above"),
            }
        };
        let contiguous = is_c_contiguous(&a.shape, &a.stride);
        match &a.data {
            Data::Inline(src) => {
                // numpy arrays are C order from offset 0 (`numpy` builds them so).
                let mut bytes = src.bytes(&self.pickle);
                let mut buf = [0u8; 8];
                for i in 0..n {
                    for b in buf.iter_mut().take(elem as usize) {
                        *b = bytes
                            .next()
                            .ok_or_else(|| bad("data shorter than its shape".into()))?;
                    }
                    each(i, value(&buf[..elem as usize]))?;
                }
                Ok(())
            }
            Data::Storage { key: skey, numel } => {
                let name = format!("{}data/{skey}", self.prefix);
                let file_len = std::fs::metadata(&path)
                    .map_err(|e| StoreError::io(&path, "stat", e))?
                    .len();
                let want = numel.saturating_mul(elem);
                let mut member = self
                    .zip
                    .by_name(&name)
                    .map_err(|e| bad(format!("storage member {name:?}: {e}")))?;
                let declared = member.size();
                if declared != want {
                    return Err(bad(format!(
                        "storage {name:?} holds {declared} bytes, expected {numel} elements × {elem} bytes = {want}"
                    )));
                }
                if member.compression() != CompressionMethod::Stored {
                    return Err(bad(format!(
                        "storage {name:?} compressed ({:?}), expected stored as torch.save writes",
                        member.compression()
                    )));
                }
                if declared > file_len {
                    return Err(bad(format!(
                        "storage {name:?} declares {declared} bytes, more than the file's {file_len}"
                    )));
                }
                let read_err = |e: std::io::Error| {
                    bad(format!(
                        "storage {name:?}: cannot read (truncated or damaged?): {e}"
                    ))
                };
                if contiguous {
                    std::io::copy(
                        &mut (&mut member).take(a.offset.saturating_mul(elem)),
                        &mut std::io::sink(),
                    )
                    .map_err(read_err)?;
                    let mut chunk = vec![0u8; (1 << 20) - (1 << 20) % elem as usize];
                    let mut i = 0u64;
                    while i < n {
                        let k = ((n - i) * elem).min(chunk.len() as u64) as usize;
                        member.read_exact(&mut chunk[..k]).map_err(read_err)?;
                        for c in chunk[..k].chunks_exact(elem as usize) {
                            each(i, value(c))?;
                            i += 1;
                        }
                    }
                    // The rest, so that the member's CRC is checked.
                    std::io::copy(&mut member, &mut std::io::sink()).map_err(read_err)?;
                    Ok(())
                } else {
                    drop(member);
                    limits::check_memory(
                        &path,
                        &format!("storage {name:?}"),
                        u128::from(declared),
                    )?;
                    let bytes = read_member(&mut self.zip, &path, &name, file_len)?;
                    // A strided view (a transpose saved as such): walk the index in C order.
                    let mut idx = vec![0u64; a.shape.len()];
                    for i in 0..n {
                        let off =
                            a.offset + idx.iter().zip(&a.stride).map(|(i, s)| i * s).sum::<u64>();
                        let at = (off * elem) as usize;
                        each(i, value(&bytes[at..at + elem as usize]))?;
                        for d in (0..idx.len()).rev() {
                            idx[d] += 1;
                            if idx[d] < a.shape[d] {
                                break;
                            }
                            idx[d] = 0;
                        }
                    }
                    Ok(())
                }
            }
        }
    }
}

fn is_c_contiguous(shape: &[u64], stride: &[u64]) -> bool {
    let mut want = 1u64;
    for (&d, &s) in shape.iter().zip(stride).rev() {
        if d > 1 && s != want {
            return false;
        }
        want = want.saturating_mul(d);
    }
    true
}

/// Reads member `name` whole: stored (not compressed), its declared size within the
/// file's length and memory; a bad CRC or a short read is an error.
fn read_member(
    zip: &mut ZipArchive<BufReader<File>>,
    path: &Path,
    name: &str,
    file_len: u64,
) -> Result<Vec<u8>, StoreError> {
    let bad = |what: String| StoreError::input(path, format!("member {name:?}: {what}"));
    let mut m = zip.by_name(name).map_err(|e| bad(e.to_string()))?;
    if m.compression() != CompressionMethod::Stored {
        return Err(bad(format!(
            "compressed ({:?}), expected stored as torch.save writes",
            m.compression()
        )));
    }
    let size = m.size();
    if size > file_len {
        return Err(bad(format!(
            "declares {size} bytes, more than the file's {file_len}"
        )));
    }
    limits::check_memory(path, &format!("member {name:?}"), u128::from(size))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(size as usize)
        .map_err(|_| bad(format!("cannot allocate {size} bytes")))?;
    m.read_to_end(&mut buf)
        .map_err(|e| bad(format!("cannot read (truncated or damaged?): {e}")))?;
    if buf.len() as u64 != size {
        return Err(bad(format!("read {} bytes, expected {size}", buf.len())));
    }
    Ok(buf)
}
