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
//! **Memory.** [`PtFile::for_each_int`] streams: a contiguous tensor's storage is read in
//! 1 MiB chunks (to its end, so its CRC is checked), a numpy array's bytes are decoded
//! where they lie in the pickle (protocol 2 writes them as latin-1 text, each byte above
//! 0x7F two UTF-8 bytes; they are never copied out), and only a strided view reads its
//! storage whole. What is held is the pickle (small for tensors; the arrays themselves
//! for numpy) plus what the caller keeps.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use npyz::zip::{CompressionMethod, ZipArchive};

use crate::store::import::limits;
use crate::store::StoreError;

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

/// A pickle value. GLOBAL and REDUCE give inert records; nothing is ever called.
#[derive(Debug)]
enum Value {
    None,
    Bool(bool),
    Int(i64),
    Str(String),
    /// A long string (`text`, UTF-8 checked) or bytes, left in the pickle at `start`.
    Blob {
        start: usize,
        len: usize,
        text: bool,
    },
    Tuple(Vec<Rc<Value>>, Depth),
    List(Vec<Rc<Value>>, Depth),
    Dict(Vec<(Rc<Value>, Rc<Value>)>, Depth),
    Global(String, String),
    /// `func(*args)`, not called.
    Reduce(Rc<Value>, Rc<Value>, Depth),
    /// `obj.__setstate__(state)`, not called.
    Build(Rc<Value>, Rc<Value>, Depth),
    PersId(Rc<Value>, Depth),
    Mark,
}

/// A composite value's nesting depth (a scalar's is 0), kept so that it is bounded by
/// [`MAX_DEPTH`] as values are built: dropping a value recurses through its nesting, and a
/// hostile pickle of a million nested tuples would overflow the stack there.
type Depth = u32;

/// The deepest nesting a pickle may build. OGB's files nest 7 deep (dict, numpy array,
/// its state, the dtype, its arguments).
const MAX_DEPTH: Depth = 32;

impl Value {
    fn depth(&self) -> Depth {
        match self {
            Value::Tuple(_, d)
            | Value::List(_, d)
            | Value::Dict(_, d)
            | Value::Reduce(_, _, d)
            | Value::Build(_, _, d)
            | Value::PersId(_, d) => *d,
            _ => 0,
        }
    }
}

/// One more than the deepest of `items`.
fn over<'a>(items: impl IntoIterator<Item = &'a Rc<Value>>) -> Depth {
    1 + items.into_iter().map(|v| v.depth()).max().unwrap_or(0)
}

/// The most members a `.pt` archive may list (OGB's hold 4 to 8).
const MAX_MEMBERS: usize = 1 << 16;

/// Strings longer than this stay in the pickle ([`Value::Blob`]): names and keys are short.
const MAX_NAME: usize = 4096;

/// The most values the stack may hold (a tuple of more is no shape this reader reads).
const MAX_TUPLE: usize = 1 << 20;

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

/// The pickle machine (see the module comment).
struct Machine<'p> {
    path: &'p Path,
    stack: Vec<Rc<Value>>,
    /// Stack heights at each MARK.
    marks: Vec<usize>,
    memo: HashMap<u32, Rc<Value>>,
}

impl<'p> Machine<'p> {
    fn new(path: &'p Path) -> Self {
        Machine {
            path,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
        }
    }

    fn run(mut self, p: &[u8]) -> Result<Rc<Value>, StoreError> {
        let mut at = 0usize;
        loop {
            let pos = at;
            let op = *p
                .get(at)
                .ok_or_else(|| self.err(pos, "the pickle ends without STOP".into()))?;
            at += 1;
            let take = |at: &mut usize, n: usize| -> Result<&[u8], StoreError> {
                let s = p.get(*at..at.saturating_add(n)).ok_or_else(|| {
                    StoreError::input(
                        self.path,
                        format!(
                            "data.pkl: offset {pos}: opcode {op:#04x} runs past the pickle's end"
                        ),
                    )
                })?;
                *at += n;
                Ok(s)
            };
            match op {
                0x80 => {
                    // PROTO
                    let v = take(&mut at, 1)?[0];
                    if !(2..=5).contains(&v) {
                        return Err(self.err(pos, format!("pickle protocol {v}, expected 2 to 5")));
                    }
                }
                b'.' => {
                    // STOP
                    if self.stack.len() != 1 || !self.marks.is_empty() {
                        return Err(self.err(pos, format!("STOP with {} values on the stack, expected 1", self.stack.len())));
                    }
                    return Ok(self.stack.pop().expect("one value"));
                }
                b'(' => {
                    self.marks.push(self.stack.len());
                    self.stack.push(Rc::new(Value::Mark));
                }
                b'}' => self.push(Value::Dict(Vec::new(), 1)),
                b']' => self.push(Value::List(Vec::new(), 1)),
                b')' => self.push(Value::Tuple(Vec::new(), 1)),
                b'N' => self.push(Value::None),
                0x88 => self.push(Value::Bool(true)),
                0x89 => self.push(Value::Bool(false)),
                b'K' => {
                    let v = take(&mut at, 1)?[0];
                    self.push(Value::Int(i64::from(v)));
                }
                b'M' => {
                    let b = take(&mut at, 2)?;
                    self.push(Value::Int(i64::from(u16::from_le_bytes([b[0], b[1]]))));
                }
                b'J' => {
                    let b = take(&mut at, 4)?;
                    self.push(Value::Int(i64::from(i32::from_le_bytes(b.try_into().unwrap()))));
                }
                0x8a => {
                    // LONG1: n bytes of two's-complement little-endian.
                    let n = take(&mut at, 1)?[0] as usize;
                    let b = take(&mut at, n)?;
                    if n > 8 {
                        return Err(self.err(pos, format!("LONG1 of {n} bytes, expected an integer of at most 8")));
                    }
                    let mut v: i64 = 0;
                    for (i, &x) in b.iter().enumerate() {
                        v |= i64::from(x) << (8 * i);
                    }
                    if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                        v -= 1i64 << (8 * n);
                    }
                    self.push(Value::Int(v));
                }
                b'X' => {
                    let n = u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap()) as usize;
                    let start = at;
                    let b = take(&mut at, n)?;
                    let s = std::str::from_utf8(b)
                        .map_err(|_| self.err(pos, "BINUNICODE is not UTF-8".into()))?;
                    if n <= MAX_NAME {
                        self.push(Value::Str(s.to_string()));
                    } else {
                        // A numpy array's bytes (protocol 2): left in the pickle.
                        self.push(Value::Blob { start, len: n, text: true });
                    }
                }
                b'C' | b'B' => {
                    // SHORT_BINBYTES, BINBYTES (protocol 3+)
                    let n = if op == b'C' {
                        take(&mut at, 1)?[0] as usize
                    } else {
                        u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap()) as usize
                    };
                    let start = at;
                    take(&mut at, n)?;
                    self.push(Value::Blob { start, len: n, text: false });
                }
                b'c' => {
                    let module = self.line(p, &mut at, pos)?;
                    let name = self.line(p, &mut at, pos)?;
                    self.push(Value::Global(module, name));
                }
                b'q' | b'r' => {
                    let key = if op == b'q' {
                        u32::from(take(&mut at, 1)?[0])
                    } else {
                        u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap())
                    };
                    let top = self.top(pos)?;
                    self.memo.insert(key, top);
                }
                b'h' | b'j' => {
                    let key = if op == b'h' {
                        u32::from(take(&mut at, 1)?[0])
                    } else {
                        u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap())
                    };
                    let v = self
                        .memo
                        .get(&key)
                        .cloned()
                        .ok_or_else(|| self.err(pos, format!("BINGET of memo {key}, never put")))?;
                    self.stack.push(v);
                }
                b't' => {
                    let items = self.pop_mark(pos)?;
                    let d = over(&items);
                    self.push(Value::Tuple(items, d));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n + self.marks.last().map_or(0, |m| m + 1) {
                        return Err(self.err(pos, format!("TUPLE{n} on a stack too short")));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let d = over(&items);
                    self.push(Value::Tuple(items, d));
                }
                b'R' => {
                    let args = self.pop(pos)?;
                    let func = self.pop(pos)?;
                    if !matches!(*args, Value::Tuple(..)) {
                        return Err(self.err(pos, "REDUCE's arguments are not a tuple".into()));
                    }
                    let d = over([&func, &args]);
                    self.push(Value::Reduce(func, args, d));
                }
                b'b' => {
                    // BUILD sets the state of `obj` in place: memo entries that hold it
                    // (numpy reuses a dtype by BINGET) see the built object.
                    let state = self.pop(pos)?;
                    let obj = self.pop(pos)?;
                    let d = over([&obj, &state]);
                    self.replace_top_memo(&obj.clone(), Value::Build(obj, state, d));
                }
                b'Q' => {
                    let id = self.pop(pos)?;
                    let d = over([&id]);
                    self.push(Value::PersId(id, d));
                }
                b's' | b'u' => {
                    let items = if op == b's' {
                        let v = self.pop(pos)?;
                        let k = self.pop(pos)?;
                        vec![k, v]
                    } else {
                        self.pop_mark(pos)?
                    };
                    if items.len() % 2 != 0 {
                        return Err(self.err(pos, "SETITEMS with an odd number of values".into()));
                    }
                    let d = self.pop(pos)?;
                    let Value::Dict(entries, depth) = &*d else {
                        return Err(self.err(pos, "SETITEM(S) on a value that is not a dict".into()));
                    };
                    let depth = (*depth).max(over(&items));
                    let mut entries: Vec<_> = entries.clone();
                    for kv in items.chunks_exact(2) {
                        entries.push((kv[0].clone(), kv[1].clone()));
                    }
                    self.replace_top_memo(&d, Value::Dict(entries, depth));
                }
                b'a' | b'e' => {
                    let items = if op == b'a' {
                        vec![self.pop(pos)?]
                    } else {
                        self.pop_mark(pos)?
                    };
                    let l = self.pop(pos)?;
                    let Value::List(old, depth) = &*l else {
                        return Err(self.err(pos, "APPEND(S) on a value that is not a list".into()));
                    };
                    let depth = (*depth).max(over(&items));
                    let mut all = old.clone();
                    all.extend(items);
                    self.replace_top_memo(&l, Value::List(all, depth));
                }
                _ => {
                    return Err(self.err(
                        pos,
                        format!(
                            "opcode {op:#04x} ({}) is not one torch.save writes for a dict of arrays; refused",
                            opcode_name(op)
                        ),
                    ))
                }
            }
            if self.stack.len() > MAX_TUPLE {
                return Err(self.err(pos, format!("more than {MAX_TUPLE} values on the stack")));
            }
            if self.stack.last().is_some_and(|v| v.depth() > MAX_DEPTH) {
                return Err(self.err(
                    pos,
                    format!("values nested more than {MAX_DEPTH} deep, expected a dict of arrays"),
                ));
            }
        }
    }

    /// Pushes `new` in place of `old` (a dict or list filled, or an object built, after it
    /// was memoised: the memo entries that held `old` now hold `new`, as Python's in-place
    /// mutation would show).
    fn replace_top_memo(&mut self, old: &Rc<Value>, new: Value) {
        let new = Rc::new(new);
        for v in self.memo.values_mut() {
            if Rc::ptr_eq(v, old) {
                *v = new.clone();
            }
        }
        self.stack.push(new);
    }

    fn err(&self, pos: usize, what: String) -> StoreError {
        StoreError::input(self.path, format!("data.pkl: offset {pos}: {what}"))
    }

    fn push(&mut self, v: Value) {
        self.stack.push(Rc::new(v));
    }

    fn top(&self, pos: usize) -> Result<Rc<Value>, StoreError> {
        match self.stack.last() {
            Some(v) if !matches!(**v, Value::Mark) => Ok(v.clone()),
            _ => Err(self.err(pos, "a value expected on the stack".into())),
        }
    }

    fn pop(&mut self, pos: usize) -> Result<Rc<Value>, StoreError> {
        let v = self.top(pos)?;
        if self.marks.last() == Some(&(self.stack.len() - 1)) {
            return Err(self.err(pos, "a value expected above the mark".into()));
        }
        self.stack.pop();
        Ok(v)
    }

    fn pop_mark(&mut self, pos: usize) -> Result<Vec<Rc<Value>>, StoreError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| self.err(pos, "no MARK on the stack".into()))?;
        let items = self.stack.split_off(m + 1);
        self.stack.pop();
        Ok(items)
    }

    fn line(&self, p: &[u8], at: &mut usize, pos: usize) -> Result<String, StoreError> {
        let rest = &p[*at..];
        let end = rest
            .iter()
            .take(256)
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.err(pos, "GLOBAL name without its newline".into()))?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|_| self.err(pos, "GLOBAL name is not UTF-8".into()))?;
        *at += end + 1;
        Ok(s.to_string())
    }
}

/// The pickle opcode's name, for messages.
fn opcode_name(op: u8) -> &'static str {
    match op {
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'G' => "BINFLOAT",
        b'I' => "INT",
        b'L' => "LONG",
        0x8b => "LONG4",
        b'P' => "PERSID",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'i' => "INST",
        b'o' => "OBJ",
        b'd' => "DICT",
        b'l' => "LIST",
        b'g' => "GET",
        b'p' => "PUT",
        _ => "unknown",
    }
}

// ---------------------------------------------------------------- values to arrays

fn global_is(v: &Value, module: &str, name: &str) -> bool {
    matches!(v, Value::Global(m, n) if m == module && n == name)
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn as_str(v: &Value) -> Option<&str> {
    match v {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

fn as_tuple(v: &Value) -> Option<&[Rc<Value>]> {
    match v {
        Value::Tuple(t, _) => Some(t),
        _ => None,
    }
}

/// A tuple of non-negative integers (a shape or strides).
fn dims(v: &Value) -> Option<Vec<u64>> {
    as_tuple(v)?
        .iter()
        .map(|x| as_int(x).and_then(|i| u64::try_from(i).ok()))
        .collect()
}

/// Bytes pickled at protocol 2 (`_codecs.encode(str, 'latin1')`) or 3+ (BINBYTES).
fn bytes_of(v: &Value, pickle: &[u8]) -> Option<Inline> {
    match v {
        Value::Blob {
            start,
            len,
            text: false,
        } => Some(Inline::Raw {
            start: *start,
            len: *len,
        }),
        Value::Reduce(f, args, _) if global_is(f, "_codecs", "encode") => {
            let a = as_tuple(args)?;
            let [s, enc] = a else { return None };
            if as_str(enc)? != "latin1" {
                return None;
            }
            match &**s {
                Value::Str(s) => {
                    let mut out = Vec::with_capacity(s.len());
                    for c in s.chars() {
                        out.push(u8::try_from(u32::from(c)).ok()?);
                    }
                    Some(Inline::Owned(Rc::new(out)))
                }
                Value::Blob {
                    start,
                    len,
                    text: true,
                } => Some(Inline::Latin1 {
                    start: *start,
                    len: *len,
                    bytes: latin1_len(&pickle[*start..start + len])?,
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The dict at the root, its values described.
fn describe(
    path: &Path,
    root: &Value,
    pickle: &[u8],
) -> Result<Vec<(String, PtArray)>, StoreError> {
    let Value::Dict(items, _) = root else {
        return Err(StoreError::input(
            path,
            format!(
                "the pickle holds a {}, expected a dict of arrays",
                kind(root)
            ),
        ));
    };
    let mut out: Vec<(String, PtArray)> = Vec::with_capacity(items.len());
    for (k, v) in items {
        let key = as_str(k).ok_or_else(|| {
            StoreError::input(
                path,
                format!("a dict key is a {}, expected a string", kind(k)),
            )
        })?;
        let a = array(v, pickle)
            .map_err(|what| StoreError::input(path, format!("key {key:?}: {what}")))?;
        if out.iter().any(|(k, _)| k == key) {
            return Err(StoreError::input(path, format!("key {key:?} twice")));
        }
        out.push((key.to_string(), a));
    }
    Ok(out)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Str(_) => "str",
        Value::Blob { text: true, .. } => "str",
        Value::Blob { text: false, .. } => "bytes",
        Value::Tuple(..) => "tuple",
        Value::List(..) => "list",
        Value::Dict(..) => "dict",
        Value::Global(..) => "global",
        Value::Reduce(..) => "reduced object",
        Value::Build(..) => "built object",
        Value::PersId(..) => "persistent id",
        Value::Mark => "mark",
    }
}

/// A tensor or a numpy array.
fn array(v: &Value, pickle: &[u8]) -> Result<PtArray, String> {
    match v {
        Value::Reduce(f, args, _) if global_is(f, "torch._utils", "_rebuild_tensor_v2") => {
            tensor(as_tuple(args).expect("REDUCE checks its tuple"))
        }
        Value::Build(obj, state, _) => numpy(obj, state, pickle),
        Value::Reduce(f, _, _) => match &**f {
            Value::Global(m, n) => Err(format!(
                "an object built by {m}.{n}, expected a tensor (torch._utils._rebuild_tensor_v2) or a numpy array"
            )),
            _ => Err("an object built by a non-global, expected a tensor or a numpy array".into()),
        },
        other => Err(format!(
            "a {}, expected a tensor or a numpy array",
            kind(other)
        )),
    }
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[,
/// metadata])`.
fn tensor(args: &[Rc<Value>]) -> Result<PtArray, String> {
    if !(6..=7).contains(&args.len()) {
        return Err(format!(
            "_rebuild_tensor_v2 with {} arguments, expected 6 or 7",
            args.len()
        ));
    }
    let Value::PersId(id, _) = &*args[0] else {
        return Err("a tensor whose storage is not a persistent id".into());
    };
    let id = as_tuple(id).ok_or("a storage id that is not a tuple")?;
    let [tag, class, key, _location, numel] = id else {
        return Err(format!(
            "a storage id of {} fields, expected ('storage', class, key, location, numel)",
            id.len()
        ));
    };
    if as_str(tag) != Some("storage") {
        return Err("a persistent id that is not a storage".into());
    }
    let dtype = match &**class {
        Value::Global(m, n) if m == "torch" => match n.as_str() {
            "LongStorage" => PtDtype::I64,
            "IntStorage" => PtDtype::I32,
            "FloatStorage" => PtDtype::Other("float32"),
            "DoubleStorage" => PtDtype::Other("float64"),
            "HalfStorage" => PtDtype::Other("float16"),
            "BFloat16Storage" => PtDtype::Other("bfloat16"),
            "ShortStorage" => PtDtype::Other("int16"),
            "CharStorage" => PtDtype::Other("int8"),
            "ByteStorage" => PtDtype::Other("uint8"),
            "BoolStorage" => PtDtype::Other("bool"),
            _ => PtDtype::Other("an unknown torch storage"),
        },
        _ => return Err("a storage class that is not torch.<Type>Storage".into()),
    };
    let key = match &**key {
        Value::Str(s)
            if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            s.clone()
        }
        _ => return Err("a storage key that is not a plain name".into()),
    };
    let numel = as_int(numel)
        .and_then(|i| u64::try_from(i).ok())
        .ok_or("a storage size that is not a non-negative integer")?;
    let offset = as_int(&args[1])
        .and_then(|i| u64::try_from(i).ok())
        .ok_or("a storage offset that is not a non-negative integer")?;
    let shape = dims(&args[2]).ok_or("a size that is not a tuple of non-negative integers")?;
    let stride = dims(&args[3]).ok_or("a stride that is not a tuple of non-negative integers")?;
    if shape.len() != stride.len() {
        return Err(format!(
            "size {shape:?} and stride {stride:?} of different lengths"
        ));
    }
    if shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .is_none()
    {
        return Err(format!("size {shape:?} overflows"));
    }
    Ok(PtArray {
        dtype,
        shape,
        stride,
        offset,
        data: Data::Storage { key, numel },
    })
}

/// `_reconstruct(ndarray, (0,), b'b')` then BUILD with `(1, shape, dtype, fortran, data)`.
fn numpy(obj: &Value, state: &Value, pickle: &[u8]) -> Result<PtArray, String> {
    let ok_ctor = match obj {
        Value::Reduce(f, args, _) => {
            (global_is(f, "numpy.core.multiarray", "_reconstruct")
                || global_is(f, "numpy._core.multiarray", "_reconstruct"))
                && as_tuple(args)
                    .and_then(|a| a.first())
                    .is_some_and(|c| global_is(c, "numpy", "ndarray"))
        }
        _ => false,
    };
    if !ok_ctor {
        return Err("a built object that is not a numpy array".into());
    }
    let st = as_tuple(state).ok_or("a numpy array whose state is not a tuple")?;
    let [version, shape, dtype, fortran, data] = st else {
        return Err(format!(
            "a numpy array state of {} fields, expected 5",
            st.len()
        ));
    };
    if as_int(version) != Some(1) {
        return Err("a numpy array state of an unknown version".into());
    }
    let shape = dims(shape).ok_or("a numpy shape that is not a tuple of non-negative integers")?;
    let n = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("numpy shape {shape:?} overflows"))?;
    if !matches!(**fortran, Value::Bool(false)) {
        return Err("a Fortran-order numpy array, expected C order".into());
    }
    let dtype = numpy_dtype(dtype)?;
    let data = bytes_of(data, pickle).ok_or("a numpy array whose data is not bytes")?;
    if dtype.size() > 0 && data.len() != n.saturating_mul(dtype.size()) {
        return Err(format!(
            "numpy shape {shape:?} of {} needs {} bytes, its data holds {}",
            dtype.name(),
            n.saturating_mul(dtype.size()),
            data.len()
        ));
    }
    let mut stride = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * shape[d + 1];
    }
    Ok(PtArray {
        dtype,
        shape,
        stride,
        offset: 0,
        data: Data::Inline(data),
    })
}

/// `dtype('i8', False, True)` then BUILD with `(3, '<', ...)`: little-endian int64/int32.
fn numpy_dtype(v: &Value) -> Result<PtDtype, String> {
    let Value::Build(obj, state, _) = v else {
        return Err("a numpy dtype that is not a built numpy.dtype".into());
    };
    let Value::Reduce(f, args, _) = &**obj else {
        return Err("a numpy dtype that is not numpy.dtype(...)".into());
    };
    if !global_is(f, "numpy", "dtype") {
        return Err("a numpy dtype that is not numpy.dtype(...)".into());
    }
    let name = as_tuple(args)
        .and_then(|a| a.first())
        .and_then(|s| as_str(s))
        .ok_or("a numpy dtype without its name")?;
    let order = as_tuple(state)
        .and_then(|s| s.get(1))
        .and_then(|s| as_str(s))
        .ok_or("a numpy dtype without its byte order")?;
    Ok(match (name, order) {
        ("i8", "<") => PtDtype::I64,
        ("i4", "<") => PtDtype::I32,
        ("i8" | "i4", _) => PtDtype::Other("big-endian integer"),
        ("f4", _) => PtDtype::Other("float32"),
        ("f8", _) => PtDtype::Other("float64"),
        ("f2", _) => PtDtype::Other("float16"),
        ("b1", _) => PtDtype::Other("bool"),
        ("u1", _) => PtDtype::Other("uint8"),
        _ => PtDtype::Other("an unsupported numpy dtype"),
    })
}
